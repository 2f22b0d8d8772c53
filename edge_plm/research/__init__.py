"""Desktop research code the device never runs: the character SAFFU switch network
(`charnet`), the SAFFU language model (`lm`), and their shared SAFFU blocks (`saffu`, NumPy
reference), Numba kernels (`kernels`) and optimisers (`optim`)."""
