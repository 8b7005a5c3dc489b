"""Everything a forked child runs, the candidate's and the reference's: the request loop
(harnesses), the Triton hooks, launch counting, poisoned memory, output provenance and the
in-process timer. Code here runs beside candidate code and decides nothing: the worker checks
every reply. Imports only `judge.common` of the judge (a test enforces it)."""
