"""The software side of the RV32IM+Zba CPU: machine interface, C toolchain and runtime, ELF loader,
reference machine (unicorn), program table, and the engines that run programs."""
