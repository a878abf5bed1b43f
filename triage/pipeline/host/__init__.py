"""The incident's other records (`analyze LOG --with FILE`): the kernel log, nvidia-smi,
Kubernetes and Slurm, read into events on the server log's clock, and the attribution of the
failure to a host event when one explains it (a GPU that fell off the bus, an uncorrectable ECC
error, a container killed at its memory limit).

source.py reads a file and names its kind; clock.py turns each record's timestamps into the
server log's clock; kernel.py, nvsmi.py and orchestrator.py read the events; attribute.py maps
ranks to GPUs and decides what is to blame; correlate.py runs them in that order.
"""
