"""reconcile: prove a Delta table equals its upstream TiDB/MySQL/MariaDB table, or show where it does not.

Modules, pure logic first:
    encoding   the canonical row encoding (spec in its docstring) and its SQL half
    sparkenc   the same encoding as Spark Columns (built-ins only)
    schema     upstream types, their Delta types, the schema check
    chunks     key ranges, the predicate both sides apply, bisection
    result     the result object, its rich and JSON renderings, exit codes
    reports    the result as JUnit XML, a Markdown summary and a self-contained HTML page
    options    config + flags for one run
    errors     the user-fixable errors (exit 2)
    upstream/  dialect (the seam: SQL dialects by name) with mysql, mariadb, tidb: every statement
               an upstream server is sent
I/O:
    upstream/  sql (pymysql: runs a dialect's statements, at a ts or in consistent snapshots), files
               (Dumpling, Parquet, the simulator's expected state), dumpling (that export's layout)
    downstream the Delta version at a resolved ts
    sparkside  checksums and row reads over a DataFrame (the Delta side, or files)
    diff       the keyed (or multiset) row diff in Spark
    repair     one MERGE from upstream rows (by key, or as a multiset), then a re-check
    engine     the per-table flow: chunks -> checksums -> bisection -> row diff -> repair
    cli        `reconcile run`
"""
