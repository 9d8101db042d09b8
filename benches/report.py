"""The `make bench` report: reads the run's results (JSON lines), prints the tables and the
target checks, writes <out>/<timestamp>.json and <out>/latest.json. Exit 1 on a hard failure
(p50 stall through switchyard, failed requests across reloads, dropped streams)."""
import json
import sys
import time

res_path, out_dir = sys.argv[1], sys.argv[2]
R = {}
for line in open(res_path):
    line = line.strip()
    if line:
        rec = json.loads(line)
        R[rec["key"]] = rec["value"]

STALL_US = 20_000  # a p50 above this through switchyard means a Nagle/delayed-ACK stall


def ms(us):
    return None if us is None else round(us / 1000.0, 3)


def ratio(a, b):
    if a is None or b is None or b <= 0:
        return None
    return round(a / b, 2)


def fmt(v, unit=""):
    if v is None:
        return "n/a "
    if isinstance(v, float):
        return f"{v:,.2f}{unit}"
    return f"{v:,}{unit}"


report = {"meta": {**R.get("meta", {}), **R.get("meta.end", {})}, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
checks = []  # (status, text) with status PASS / MISS / FAIL


def check(ok, hard, text):
    checks.append(("PASS" if ok else ("FAIL" if hard else "MISS"), text))


# ---- closed loop ----------------------------------------------------------------------
closed = {}
# Every closed-loop row run.sh recorded, in the order it ran them.
for p in [k.split(".", 1)[1] for k in R if k.startswith("closed.")]:
    w, c = R.get(f"closed.{p}"), R.get(f"cpu.{p}")
    if not w:
        continue
    secs = w["duration_us"] / 1e6
    errs = sum(w["errors"].values())
    cpu_us = c["ticks"] * 1e6 / c["hz"] / w["requests"] if c and w["requests"] else None
    # The process's own code (utime); the rest of cpu_us is the kernel's work for it.
    user_us = c["user_ticks"] * 1e6 / c["hz"] / w["requests"] if c and "user_ticks" in c and w["requests"] else None
    closed[p] = {
        "rps": round(w["requests"] / secs, 1),
        "requests": w["requests"],
        "errors": errs,
        "p50_us": w["latency"]["p50_us"],
        "p90_us": w["latency"]["p90_us"],
        "p99_us": w["latency"]["p99_us"],
        "cpu_us_per_req": None if cpu_us is None else round(cpu_us, 1),
        "user_us_per_req": None if user_us is None else round(user_us, 1),
    }
d = closed.get("direct")
for p, row in closed.items():
    if d and p in ("nginx", "hyper", "switchyard", "switchyard_xlate", "litellm"):
        row["added_p50_us"] = row["p50_us"] - d["p50_us"]
        row["added_p99_us"] = row["p99_us"] - d["p99_us"]
report["closed_loop"] = closed
sy, ng = closed.get("switchyard"), closed.get("nginx")
if sy and ng:
    report["ratios_switchyard_over_nginx"] = r = {
        "added_p50": ratio(sy.get("added_p50_us"), ng.get("added_p50_us")),
        "added_p99": ratio(sy.get("added_p99_us"), ng.get("added_p99_us")),
        "rps": ratio(sy["rps"], ng["rps"]),
        "cpu_per_req": ratio(sy["cpu_us_per_req"], ng["cpu_us_per_req"]),
    }
    check(r["rps"] is not None and r["rps"] >= 0.6, False, f"RPS at {report['meta'].get('connections')} conns >= 0.6x nginx (got {fmt(r['rps'])}x)")
    check(r["cpu_per_req"] is not None and r["cpu_per_req"] <= 2.0, False, f"CPU/request <= 2.0x nginx (got {fmt(r['cpu_per_req'])}x)")
if sy and (hy := closed.get("hyper")):
    report["ratios_switchyard_over_bare_hop"] = rh = {
        "cpu_per_req": ratio(sy["cpu_us_per_req"], hy["cpu_us_per_req"]),
        "user_per_req": ratio(sy["user_us_per_req"], hy["user_us_per_req"]),
        "rps": ratio(sy["rps"], hy["rps"]),
    }
    check(rh["cpu_per_req"] is not None and rh["cpu_per_req"] <= 1.3, False, f"CPU/request <= 1.3x the bare hyper hop's (got {fmt(rh['cpu_per_req'])}x)")
# A streamed answer (20 content chunks + usage + [DONE]): in one upstream read (`_sse`) and
# one event per read (`_sse1`); the cost per event is the stream's CPU above the short
# request's, over its 22 events.
for sfx, what in (("sse", "one upstream read"), ("sse1", "one event per read")):
    ss, ns = closed.get(f"switchyard_{sfx}"), closed.get(f"nginx_{sfx}")
    if ss and ns:
        report[f"ratios_stream_{sfx}_switchyard_over_nginx"] = rs = {
            "cpu_per_req": ratio(ss["cpu_us_per_req"], ns["cpu_us_per_req"]),
            "rps": ratio(ss["rps"], ns["rps"]),
            "cpu_us_per_event": None if not sy or ss["cpu_us_per_req"] is None or sy["cpu_us_per_req"] is None
            else round((ss["cpu_us_per_req"] - sy["cpu_us_per_req"]) / 22, 2),
        }
        check(rs["cpu_per_req"] is not None and rs["cpu_per_req"] <= 2.0, False, f"streamed answer, {what}: CPU/request <= 2.0x nginx (got {fmt(rs['cpu_per_req'])}x; {fmt(rs['cpu_us_per_event'])} us per event)")
        check(ss["errors"] == 0, False, f"streamed answer through switchyard, {what}: 0 errors (got {ss['errors']})")
# An OpenAI client on an Anthropic channel (R16.1): the translation's CPU per request
# against the plain path.
if (sx := closed.get("switchyard_xlate")) and sy:
    report["ratios_translated_over_plain"] = rt = {
        "cpu_per_req": ratio(sx["cpu_us_per_req"], sy["cpu_us_per_req"]),
        "added_cpu_us_per_req": None if sx["cpu_us_per_req"] is None or sy["cpu_us_per_req"] is None
        else round(sx["cpu_us_per_req"] - sy["cpu_us_per_req"], 1),
        "rps": ratio(sx["rps"], sy["rps"]),
    }
    check(rt["cpu_per_req"] is not None and rt["cpu_per_req"] <= 1.5, False, f"translation path CPU/request <= 1.5x the plain path's (got {fmt(rt['cpu_per_req'])}x)")
syl, ngl = closed.get("switchyard_long"), closed.get("nginx_long")
if syl and ngl:
    report["ratios_long_body_switchyard_over_nginx"] = rl = {
        "rps": ratio(syl["rps"], ngl["rps"]),
        "cpu_per_req": ratio(syl["cpu_us_per_req"], ngl["cpu_us_per_req"]),
        "p50": ratio(syl["p50_us"], ngl["p50_us"]),
    }
    check(rl["cpu_per_req"] is not None and rl["cpu_per_req"] <= 1.2, False, f"62 KB body: CPU/request <= 1.2x nginx's (got {fmt(rl['cpu_per_req'])}x)")
# Shared mode (PostgreSQL + Redis): the same targets for a client that needs no shared
# decision; the cost of a quota client's PostgreSQL debit is stated.
shr, shq = closed.get("shared"), closed.get("shared_quota")
if shr and ng:
    report["ratios_shared_over_nginx"] = r = {
        "rps": ratio(shr["rps"], ng["rps"]),
        "cpu_per_req": ratio(shr["cpu_us_per_req"], ng["cpu_us_per_req"]),
        "cpu_over_single_node": ratio(shr["cpu_us_per_req"], (sy or {}).get("cpu_us_per_req")),
        "quota_cpu_over_single_node": ratio((shq or {}).get("cpu_us_per_req"), (sy or {}).get("cpu_us_per_req")),
    }
    check(r["cpu_per_req"] is not None and r["cpu_per_req"] <= 1.5, False, f"shared mode, no shared decision: CPU/request <= 1.5x nginx (got {fmt(r['cpu_per_req'])}x)")
    check(r["rps"] is not None and r["rps"] >= 0.8, False, f"shared mode, no shared decision: RPS >= 0.8x nginx (got {fmt(r['rps'])}x)")
if sy:
    check(sy["p50_us"] <= STALL_US, True, f"closed-loop p50 through switchyard <= 20 ms, no TCP_NODELAY stall (got {fmt(ms(sy['p50_us']))} ms)")
    check(sy["errors"] == 0, False, f"closed loop through switchyard: 0 errors (got {sy['errors']})")

# ---- open loop -----------------------------------------------------------------------
opened = {}
for k, v in R.items():
    if k.startswith("open."):
        _, rate, p = k.split(".", 2)
        lat = v["latency"]
        opened.setdefault(rate, {})[p] = {
            "ok": v["ok"], "failed": v["failed"], "missing": v["missing"],
            "p50_us": lat["p50_us"], "p90_us": lat["p90_us"], "p99_us": lat["p99_us"],
            "p999_us": lat["p999_us"], "max_us": lat["max_us"],
            # How late the load generator's pacer released requests (p99): the schedule
            # the latencies are measured from was kept when this is small.
            "lag_p99_us": v.get("schedule_lag", {}).get("p99_us"),
        }
for rate, rows in opened.items():
    d = rows.get("direct")
    for p in ("nginx", "switchyard"):
        if d and p in rows:
            rows[p]["added_p50_us"] = rows[p]["p50_us"] - d["p50_us"]
            rows[p]["added_p99_us"] = rows[p]["p99_us"] - d["p99_us"]
    if "switchyard" in rows:
        s = rows["switchyard"]
        check(s["p50_us"] <= STALL_US, True, f"open loop {rate} rps: p50 through switchyard <= 20 ms (got {fmt(ms(s['p50_us']))} ms)")
        if "nginx" in rows:
            rows["ratios_switchyard_over_nginx"] = ro = {
                "added_p50": ratio(s.get("added_p50_us"), rows["nginx"].get("added_p50_us")),
                "added_p99": ratio(s.get("added_p99_us"), rows["nginx"].get("added_p99_us")),
            }
            for q in ("p50", "p99"):
                v = ro[f"added_{q}"]
                check(v is not None and v <= 2.0, False, f"open loop {rate} rps: added {q} <= 2x nginx's (got {fmt(v)}x)")
report["open_loop"] = opened

# ---- shared-mode ceilings (B-pg-pool) -------------------------------------------
# The quota client's closed-loop RPS with one client's debits batched and with one
# statement per debit (storage.debit_batch: 1), the mean batch size from the gateway's
# counters, and the rate-limited client's open loop (limits above its rate: any 429 is false).
ceil = {}
for p, key in (("shared_quota", "quota_rps_batched"), ("shared_quota_serial", "quota_rps_serial")):
    if row := closed.get(p):
        ceil[key] = row["rps"]
        ceil[key.replace("rps", "p99_us")] = row["p99_us"]
        ceil[key.replace("rps", "errors")] = row["errors"]


def batch_size(now, before=None):
    if not now or not now.get("statements"):
        return None
    st = now["statements"] - (before or {}).get("statements", 0)
    n = now["debits"] - (before or {}).get("debits", 0)
    return round(n / st, 1) if st > 0 else None


ceil["mean_batch"] = batch_size(R.get("debits.shared_quota"), R.get("debits.before_quota"))
ceil["mean_batch_serial"] = batch_size(R.get("debits.shared_quota_serial"))
for k, v in R.items():
    if k.startswith("open.") and k.endswith(".shared_limited"):
        rate = k.split(".")[1]
        too_many = sum(n for e, n in v["errors"].items() if "429" in e)
        ceil["limited"] = {"rate": v["rate"], "ok": v["ok"], "failed": v["failed"], "missing": v["missing"],
                           "false_429": too_many, "errors": v["errors"],
                           "p50_us": v["latency"]["p50_us"], "p99_us": v["latency"]["p99_us"]}
        check(too_many == 0 and v["missing"] == 0, False, f"shared mode: no false 429 at {rate} limited rps (got {too_many} 429s, {v['failed']} failed, {v['missing']} missing)")
if ceil.get("quota_rps_batched") and ceil.get("quota_rps_serial"):
    ceil["quota_speedup"] = ratio(ceil["quota_rps_batched"], ceil["quota_rps_serial"])
if len(ceil) > 2:
    report["shared_ceilings"] = ceil

# ---- SSE -------------------------------------------------------------------------------
report["sse_20_chunks"] = {
    p: {"ttfb_p50_us": v["ttfb"]["p50_us"], "ttfb_p99_us": v["ttfb"]["p99_us"],
        "ttlb_p50_us": v["ttlb"]["p50_us"], "ttlb_p99_us": v["ttlb"]["p99_us"],
        "failed": v["failed"], "incomplete": v["incomplete"], "n": v["ttfb"]["n"]}
    for p in ("direct", "nginx", "switchyard") if (v := R.get(f"sse.{p}"))
}

# ---- cold start ------------------------------------------------------------------------
if cs := R.get("coldstart"):
    report["coldstart"] = c = {
        "ready_p50_ms": ms(cs["ready"]["p50_us"]), "ready_max_ms": ms(cs["ready"]["max_us"]),
        "idle_rss_mib": round(cs["idle_rss"]["p50_kib"] / 1024, 1), "runs": cs["runs"],
        "failures": cs["failures"],
    }
    check(c["ready_p50_ms"] is not None and c["ready_p50_ms"] <= 100, False, f"cold start exec -> /readyz 200 <= 100 ms (got {fmt(c['ready_p50_ms'])} ms)")
    check(c["idle_rss_mib"] <= 30, False, f"idle RSS <= 30 MB (got {fmt(c['idle_rss_mib'])} MiB)")

# ---- reload under load ------------------------------------------------------------------
if (rb := R.get("reload.base")) and (rd := R.get("reload.during")):
    g = R.get("reload.generations", {})
    report["reload_under_load"] = rr = {
        "rate": rd["rate"], "rewrites": g.get("rewrites"),
        "generations_applied": (g.get("after", 0) - g.get("before", 0)) if g else None,
        "failed": rd["failed"] + rd["missing"], "errors": rd["errors"],
        "base": {k: rb["latency"][k] for k in ("p50_us", "p99_us", "p999_us", "max_us")},
        "during": {k: rd["latency"][k] for k in ("p50_us", "p99_us", "p999_us", "max_us")},
    }
    check(rr["failed"] == 0, True, f"0 failed requests across {rr['rewrites']} reloads (got {rr['failed']}; {rr['generations_applied']} generations applied)")

# ---- failover ----------------------------------------------------------------------------
if fo := R.get("failover"):
    pl, sp = fo["latency_plain"], fo["latency_split"]
    report["failover"] = f = {
        "rate": fo["rate"], "failed": fo["failed"] + fo["missing"],
        "no_failover": {"n": pl["n"], "p50_us": pl["p50_us"], "p99_us": pl["p99_us"]},
        "one_failover": {"n": sp["n"], "p50_us": sp["p50_us"], "p99_us": sp["p99_us"]},
        "added_p50_us": sp["p50_us"] - pl["p50_us"] if sp["n"] and pl["n"] else None,
        "added_p99_us": sp["p99_us"] - pl["p99_us"] if sp["n"] and pl["n"] else None,
    }
    check(f["failed"] == 0 and sp["n"] > 0, False, f"failover run: 0 failed, failovers seen (failed {f['failed']}, failovers {sp['n']})")

# ---- many streams ----------------------------------------------------------------------
if h := R.get("hold"):
    asked = R.get("hold.asked", {})
    report["many_streams"] = hs = {
        "asked": asked.get("streams"), "streams": h["streams"], "nofile": asked.get("nofile"),
        "completed": h["completed"], "dropped": h["dropped"], "peak_live": h["peak_live"],
        "rss_before_mib": round(h["rss_before_kib"] / 1024, 1),
        "rss_during_mib": round(h["rss_all_open_kib"] / 1024, 1),
        "rss_peak_mib": round(h["rss_peak_kib"] / 1024, 1),
        "bytes_per_stream": h["bytes_per_stream"], "all_open_after_s": h["all_open_after_s"],
    }
    check(hs["dropped"] == 0, True, f"{hs['streams']} concurrent streams: none dropped (dropped {hs['dropped']}, peak live {hs['peak_live']})")
    check(hs["bytes_per_stream"] <= 64 * 1024, False, f"bytes per held stream bounded (<= 64 KiB; got {fmt(hs['bytes_per_stream'])})")
    # No worse than the ~49.8 KB per stream measured before it.
    check(hs["bytes_per_stream"] <= 51_000, False, f"bytes per held stream no worse than ~49.8 KB (<= 51,000; got {fmt(hs['bytes_per_stream'])})")

report["checks"] = [{"status": s, "check": t} for s, t in checks]

# ---- print -----------------------------------------------------------------------------
P = print
m = report["meta"]
P(f"\nswitchyard bench  {report['time']}  commit {m.get('commit')}  {m.get('cpus')} cpus  load {m.get('loadavg_start')} -> {m.get('loadavg_end')}")
P(f"closed loop: wrk -t{m.get('threads')} -c{m.get('connections')} -d{m.get('duration_s')}s (warm-up {m.get('warmup_s')}s), POST {{model, messages}}\n")
P(f"{'path':<16}{'RPS':>10}{'p50 ms':>9}{'p99 ms':>9}{'+p50 ms':>9}{'+p99 ms':>9}{'CPU us/req':>12}{'user us':>9}{'errors':>8}")
for p, r in closed.items():
    P(f"{p:<16}{r['rps']:>10,.0f}{ms(r['p50_us']):>9.3f}{ms(r['p99_us']):>9.3f}"
      f"{fmt(ms(r.get('added_p50_us'))):>9}{fmt(ms(r.get('added_p99_us'))):>9}{fmt(r['cpu_us_per_req']):>12}"
      f"{fmt(r['user_us_per_req']):>9}{r['errors']:>8}")
P("(user us: the process's own code; the rest of CPU us is the kernel's sockets and scheduling)")
if "ratios_switchyard_over_nginx" in report:
    r = report["ratios_switchyard_over_nginx"]
    P(f"switchyard/nginx: added p50 {fmt(r['added_p50'])}x  added p99 {fmt(r['added_p99'])}x  RPS {fmt(r['rps'])}x  CPU/req {fmt(r['cpu_per_req'])}x")
if (ll := closed.get("litellm")) and ng:
    rps_x = ll["rps"] / ng["rps"] if ng["rps"] else None
    P(f"litellm (peer): RPS {'n/a' if rps_x is None else f'{rps_x:.2g}'}x nginx's, CPU/req {fmt(ratio(ll['cpu_us_per_req'], ng['cpu_us_per_req']))}x")
    report["ratios_litellm_over_nginx"] = {"rps": rps_x, "cpu_per_req": ratio(ll["cpu_us_per_req"], ng["cpu_us_per_req"])}
if "ratios_translated_over_plain" in report:
    r = report["ratios_translated_over_plain"]
    P(f"switchyard_xlate = OpenAI client on an Anthropic channel; over the plain path: CPU/req {fmt(r['cpu_per_req'])}x (+{fmt(r['added_cpu_us_per_req'])} us)  RPS {fmt(r['rps'])}x")
if "ratios_switchyard_over_bare_hop" in report:
    r = report["ratios_switchyard_over_bare_hop"]
    P(f"switchyard/bare hyper hop: CPU/req {fmt(r['cpu_per_req'])}x (its own code {fmt(r['user_per_req'])}x)  RPS {fmt(r['rps'])}x")
for sfx, what in (("sse", "whole stream in one upstream read"), ("sse1", "one event per upstream read")):
    if r := report.get(f"ratios_stream_{sfx}_switchyard_over_nginx"):
        P(f"*_{sfx} = streamed answer, 20 chunks, {what}; switchyard/nginx: CPU/req {fmt(r['cpu_per_req'])}x  RPS {fmt(r['rps'])}x  ({fmt(r['cpu_us_per_event'])} us per event above the short request)")
if "ratios_long_body_switchyard_over_nginx" in report:
    r = report["ratios_long_body_switchyard_over_nginx"]
    P(f"*_long = 60-turn (~62 KB) body; switchyard/nginx: RPS {fmt(r['rps'])}x  CPU/req {fmt(r['cpu_per_req'])}x  p50 {fmt(r['p50'])}x")
if "ratios_shared_over_nginx" in report:
    r = report["ratios_shared_over_nginx"]
    P(f"shared mode (PostgreSQL + Redis): no shared decision RPS {fmt(r['rps'])}x CPU/req {fmt(r['cpu_per_req'])}x nginx, "
      f"{fmt(r['cpu_over_single_node'])}x single-node CPU/req; quota client {fmt(r['quota_cpu_over_single_node'])}x single-node CPU/req")
if c := report.get("shared_ceilings"):
    P(f"shared-mode ceilings: quota client {fmt(c.get('quota_rps_batched'))} RPS batched (mean batch {fmt(c.get('mean_batch'))}), "
      f"{fmt(c.get('quota_rps_serial'))} RPS one statement per debit ({fmt(c.get('quota_speedup'))}x)")
    if lim := c.get("limited"):
        P(f"  rate-limited client, open loop {lim['rate']:.0f} rps: ok {lim['ok']}, 429 {lim['false_429']}, failed {lim['failed']}, missing {lim['missing']}; "
          f"p50 {ms(lim['p50_us'])} ms, p99 {ms(lim['p99_us'])} ms")
for rate, rows in opened.items():
    P(f"\nopen loop {rate} rps (latency from scheduled start)")
    P(f"{'path':<12}{'p50 ms':>9}{'p99 ms':>9}{'p99.9 ms':>10}{'+p50 ms':>9}{'+p99 ms':>9}{'failed':>8}{'lag p99 ms':>12}")
    for p in ("direct", "nginx", "switchyard"):
        if p in rows:
            x = rows[p]
            P(f"{p:<12}{ms(x['p50_us']):>9.3f}{ms(x['p99_us']):>9.3f}{ms(x['p999_us']):>10.3f}"
              f"{fmt(ms(x.get('added_p50_us'))):>9}{fmt(ms(x.get('added_p99_us'))):>9}{x['failed'] + x['missing']:>8}"
              f"{fmt(ms(x.get('lag_p99_us'))):>12}")
if report["sse_20_chunks"]:
    P("\nSSE, 20 chunks, sequential")
    P(f"{'path':<12}{'TTFB p50':>10}{'TTFB p99':>10}{'TTLB p50':>10}{'TTLB p99':>10}{'failed':>8}   (ms)")
    for p, x in report["sse_20_chunks"].items():
        P(f"{p:<12}{ms(x['ttfb_p50_us']):>10.3f}{ms(x['ttfb_p99_us']):>10.3f}{ms(x['ttlb_p50_us']):>10.3f}{ms(x['ttlb_p99_us']):>10.3f}{x['failed'] + x['incomplete']:>8}")
if c := report.get("coldstart"):
    P(f"\ncold start (exec -> /readyz 200): p50 {c['ready_p50_ms']} ms, max {c['ready_max_ms']} ms; idle RSS {c['idle_rss_mib']} MiB")
if rr := report.get("reload_under_load"):
    b, d = rr["base"], rr["during"]
    P(f"reload under load ({rr['rate']:.0f} rps, {rr['rewrites']} rewrites, {rr['generations_applied']} applied): failed {rr['failed']}; "
      f"p50/p99/p99.9 ms without {ms(b['p50_us'])}/{ms(b['p99_us'])}/{ms(b['p999_us'])}, during {ms(d['p50_us'])}/{ms(d['p99_us'])}/{ms(d['p999_us'])}")
if f := report.get("failover"):
    P(f"failover ({f['rate']:.0f} rps, 1 of 2 channels 503): no failover p50/p99 {ms(f['no_failover']['p50_us'])}/{ms(f['no_failover']['p99_us'])} ms (n={f['no_failover']['n']}), "
      f"one failover {ms(f['one_failover']['p50_us'])}/{ms(f['one_failover']['p99_us'])} ms (n={f['one_failover']['n']}); added p50 {fmt(ms(f['added_p50_us']))} ms, p99 {fmt(ms(f['added_p99_us']))} ms; failed {f['failed']}")
if hs := report.get("many_streams"):
    P(f"many streams: {hs['streams']} held (asked {hs['asked']}, fd limit {hs['nofile']}), completed {hs['completed']}, dropped {hs['dropped']}, peak live {hs['peak_live']}; "
      f"RSS {hs['rss_before_mib']} -> {hs['rss_during_mib']} MiB (peak {hs['rss_peak_mib']}), {fmt(hs['bytes_per_stream'])} bytes/stream")
if lim := R.get("limits"):
    report["rate_limit_check"] = lim
    n = lim.get("admit_settle_ns")
    check(n is not None and n < 1000, False, f"rate-limit check of a limited client under 1 us ({fmt(n)} ns)")
    P(f"rate-limit check (local, one thread): limited client admit+settle {fmt(lim.get('admit_settle_ns'))} ns, "
      f"refused {fmt(lim.get('refused_ns'))} ns, unlimited {fmt(lim.get('unlimited_ns'))} ns, "
      f"1000 clients {fmt(lim.get('many_clients_ns'))} ns")
P("\nchecks")
for s, t in checks:
    P(f"  {s:<5}{t}")

stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
for name in (f"{stamp}.json", "latest.json"):
    with open(f"{out_dir}/{name}", "w") as fh:
        json.dump(report, fh, indent=2)
P(f"\nwrote {out_dir}/{stamp}.json and {out_dir}/latest.json")
sys.exit(1 if any(s == "FAIL" for s, _ in checks) else 0)
