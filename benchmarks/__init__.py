"""streamkit's benchmarks: chunk throughput side by side, with ratios anyone can rerun.

``python -m benchmarks`` runs the fixed set (``suite``) and prints one table (``report``); every
row is measured by ``harness`` in the same run as its baseline. The rows live in ``rows_wire``,
``rows_runner`` and ``rows_agent``, the shared work in ``workloads``; ``hotpath`` profiles one
``agent.stream`` chunk. ``test_bench_*.py`` expose the same rows to pytest-benchmark; the default
test run does not collect this folder. ``bench_wire`` and ``bench_guards`` are standalone scripts.
See ``benchmarks/README.md`` for what each row means and the numbers.
"""
