"""ClickHouse 26.9 in process (chdb-core) for tests/fleet_clickhouse_current.rs.

Usage: python chdb_questions.py DB_DIR DDL_FILE INSERTS_DIR SQL_DIR OUT_DIR JOB_ID
       (SQL_DIR `-`: load and measure only, no question)

Loads the DDL (statements split as sink_clickhouse::statements does), then every file of
INSERTS_DIR in name order as `INSERT INTO probegen.<table> FORMAT JSONEachRow` with the file's
bytes (the sink's bodies as sent: NNNNNN-<table>.jsonl), runs OPTIMIZE FINAL, then every
SQL_DIR/*.sql with the query parameter job_id set (real `{job_id:String}` parameters) and writes
OUT_DIR/<name>.tsv. Also OUT_DIR/counts.tsv (rows per table under FINAL) and
OUT_DIR/parts.tsv (bytes on disk per table, system.parts, active parts).
Any failure: one line on stderr naming the statement, exit 1.
"""
import os
import sys

from chdb import session


def statements(ddl):
    out = []
    for st in ddl.split(";\n"):
        st = "\n".join(l for l in st.splitlines() if not l.lstrip().startswith("--")).strip()
        if st:
            out.append(st)
    return out


def main():
    db_dir, ddl_file, inserts_dir, sql_dir, out_dir, job = sys.argv[1:7]
    s = session.Session(db_dir)

    def run(q, fmt="TSV"):
        try:
            return str(s.query(q, fmt))
        except Exception as e:  # chdb raises its own error type
            first = q.strip().splitlines()[0][:120]
            sys.stderr.write(f"chdb: {first}: {str(e).splitlines()[0]}\n")
            sys.exit(1)

    with open(ddl_file) as f:
        for st in statements(f.read()):
            run(st)
    for name in sorted(os.listdir(inserts_dir)):
        table = name.split("-", 1)[1].rsplit(".", 1)[0]
        with open(os.path.join(inserts_dir, name)) as f:
            body = f.read()
        run(f"INSERT INTO probegen.{table} FORMAT JSONEachRow\n{body}")
    tables = ["records", "chains", "counters", "snapshots", "baselines", "port_counters",
              "qp_errors"]
    for t in tables:
        run(f"OPTIMIZE TABLE probegen.{t} FINAL")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "counts.tsv"), "w") as f:
        for t in tables:
            n = run(f"SELECT count() FROM probegen.{t} FINAL").strip()
            f.write(f"{t}\t{n}\n")
    with open(os.path.join(out_dir, "parts.tsv"), "w") as f:
        f.write(run(
            "SELECT table, sum(rows), sum(bytes_on_disk) FROM system.parts "
            "WHERE database = 'probegen' AND active GROUP BY table ORDER BY table"))
    if sql_dir == "-":
        return
    run(f"SET param_job_id = '{job}'")
    for name in sorted(os.listdir(sql_dir)):
        if not name.endswith(".sql"):
            continue
        with open(os.path.join(sql_dir, name)) as f:
            sql = f.read()
        with open(os.path.join(out_dir, name[:-4] + ".tsv"), "w") as f:
            f.write(run(sql))


if __name__ == "__main__":
    main()
