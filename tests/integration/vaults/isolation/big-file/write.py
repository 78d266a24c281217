with open("big.bin", "wb") as fh:
    fh.write(bytes(8 * 1024 * 1024))
