"""Jepsen-style harness for rqueue: clusters, workloads, faults, histories, checks, plots."""
