"""`rtip simulate`: the checklist can fail (an undersized stack, a zone loss without surplus),
the JSON carries every figure, --plot writes a PNG, bad input exits 2 without a traceback.

Runs are short: a 10-25 minute Poisson trace (seeded) with the dev stack's token mix, on a copy
of the dev stack cut to one small model whose replicas the test states.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from rtip.cli import main
from serving.hardware import GpuModel
from serving.models import CATALOG
from serving.profiles import SliceKind, profile
from serving.simulator import load_csv
from serving.slices import SharingMode
from tests.conftest import plan_of, stack_doc, write_stack

PROMPT, OUTPUT = 1155, 211  # the stack's default token mix (schema TokenMix)
# MLPerf Llama-3.1-405B server p99 limits: the batch tier's targets (FACTS.md section 7).
BATCH_TTFT_S, BATCH_TPOT_S = 6.0, 0.175


def _trace(path: Path, rate_qps: float, duration_s: float, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1 / rate_qps, int(rate_qps * duration_s * 2)))
    lines = ["timestamp,input_tokens,output_tokens"] + [f"{t:.3f},{PROMPT},{OUTPUT}"
                                                        for t in times[times < duration_s]]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("traces")
    return {"short": _trace(d / "short.csv", 1.0, 600, 1), "long": _trace(d / "long.csv", 4.0, 1200, 2),
            "hour": _trace(d / "hour.csv", 2.0, 2400, 3)}


def _stack(tmp_path: Path, name: str, peak_qps: float, replicas: tuple[int, int] | None,
           zones: list[str] | None = None) -> Path:
    platform = copy.deepcopy(stack_doc("dev")["config"]["rtip:platform"])
    if zones:
        platform["regions"][0]["zones"] = zones
    platform["models"] = [m for m in platform["models"] if m["name"] == "llama-1b"]
    platform["models"][0]["peak_qps"] = peak_qps
    if replicas:
        platform["models"][0]["replicas"] = {"min": replicas[0], "max": replicas[1]}
    return write_stack(tmp_path, platform, name)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["simulate", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _item(doc: dict, prefix: str) -> dict:
    return next(i for i in doc["models"][0]["checklist"] if i["item"].startswith(prefix))


def test_an_undersized_stack_fails_the_p99_item(tmp_path: Path, traces: dict[str, Path], capsys) -> None:
    # One llama-1b replica on half an L4 at a peak of 4 req/s. By hand from the profile's two
    # lines: each request needs a prefill of 1155 tokens and 211 decode slots; even with every
    # decode step's fixed part shared by an unbounded batch, a second of traffic at the trace's
    # mean rate needs more than a second of GPU time, so the queue grows without bound.
    prof = profile(CATALOG["llama-3.2-1b-instruct"], SliceKind(GpuModel.L4, SharingMode.TIME_SLICE, shares=2))
    scaled = load_csv(traces["short"]).scaled_to_peak(4.0)
    work_per_s = scaled.mean_qps * (prof.prefill_s(PROMPT) + OUTPUT * prof.tpot_per_seq_s)
    assert work_per_s > 1.2
    code, doc = _run(capsys, str(_stack(tmp_path, "under", 4.0, (1, 1))), "--trace", str(traces["short"]),
                     "--scale", "time")
    item = _item(doc, "p99 within SLO")
    assert code == 1 and not doc["passed"]
    assert item["status"] == "FAIL"
    assert item["figures"]["peak_ttft_s"] > BATCH_TTFT_S
    worst = doc["models"][0]["figures"]["worst_minute"]
    assert worst["minutes_over"] >= 1


def test_a_stack_with_room_passes_the_p99_item(tmp_path: Path, traces: dict[str, Path], capsys) -> None:
    # The same model and trace at 3 req/s on eight replicas: well under one replica's saturation
    # each (the undersized case above is 4 req/s on one).
    _, doc = _run(capsys, str(_stack(tmp_path, "room", 3.0, (8, 8))), "--trace", str(traces["short"]))
    item = _item(doc, "p99 within SLO")
    assert item["status"] == "PASS"
    assert item["figures"]["peak_ttft_s"] <= BATCH_TTFT_S and item["figures"]["peak_tpot_s"] <= BATCH_TPOT_S
    assert doc["models"][0]["figures"]["worst_minute"]["minutes_over"] == 0


@pytest.mark.parametrize(("replicas", "status"), [((3, 3), "FAIL"), ((6, 6), "PASS")])
def test_a_zone_loss_without_zone_surplus_fails_the_error_budget(
        tmp_path: Path, traces: dict[str, Path], capsys, replicas: tuple[int, int], status: str) -> None:
    # Three zones, peak 5 req/s (mean ~4.3). Three replicas (one per zone) leave two with ~2.2
    # req/s each after a zone loss: past one replica's saturation by the undersized case's
    # arithmetic (prefill 0.21 s + 211 x 1.5 ms of decode per request, > 1 s of work a second).
    # Six (two per zone) leave four with ~1.1 req/s each, under it. The window runs one cold start
    # (707 s) after the loss at 120 s, inside the ~1,100 s trace.
    stack = _stack(tmp_path, "z", 5.0, replicas, ["us-east-1a", "us-east-1b", "us-east-1c"])
    code, doc = _run(capsys, str(stack), "--trace", str(traces["long"]), "--zone-loss", "us-east-1a@120")
    item = _item(doc, "zone loss")
    assert item["status"] == status
    # The batch tier: p99 at 99 % availability, so 1 - 0.99 x 0.99 of the requests may go bad.
    assert item["figures"]["error_budget"] == pytest.approx(1 - 0.99 * 0.99)
    assert (item["figures"]["bad_share"] > item["figures"]["error_budget"]) == (status == "FAIL")
    assert item["figures"]["failed_in_flight"] > 0  # the zone's replicas held requests
    if status == "FAIL":
        assert code == 1


@pytest.mark.parametrize(("replicas", "pending"), [((3, 3), 0), ((6, 6), 2)])
def test_replacements_with_no_free_slot_stay_pending_on_eks(
        tmp_path: Path, traces: dict[str, Path], capsys, replicas: tuple[int, int], pending: int) -> None:
    """dev is on EKS, whose Karpenter launches no node while a zone is down, and its pool's nodes
    hold two replicas each. One replica a zone leaves a free slot in each zone up, so the lost
    one's replacement starts there; two a zone fill every node, so both of the lost zone's
    replacements wait for a node that never comes, and the item says what to do."""
    stack = _stack(tmp_path, "p", 5.0, replicas, ["us-east-1a", "us-east-1b", "us-east-1c"])
    _, doc = _run(capsys, str(stack), "--trace", str(traces["long"]), "--zone-loss", "us-east-1a@120")
    item = _item(doc, "zone loss")
    assert item["figures"]["pending_replicas"] == pending
    assert ("list it in the region's zones_down" in item["detail"]) == bool(pending)
    # min = max: no replica is removed, so no slot frees for a Pending one
    assert item["figures"]["bound_later"] == 0 and "bound later" not in item["detail"]


def test_a_zone_lost_less_than_a_cold_start_before_the_trace_ends_says_its_window_is_cut(
        tmp_path: Path, traces: dict[str, Path], capsys) -> None:
    """dev's zone-loss window is its 707 s cold start after the lost pods' eviction at 90 s
    (serving/failover.py). A loss at 120 s has its whole window inside the ~1,200 s trace,
    a loss at 900 s sees only the run's last arrival - 900 s of it, and the item says so
    (benchmarks/sweep_edge.py: a cut window's share reads high). The run's trace is the file
    rate-scaled to the stated peak of 5 req/s, which moves its last arrival."""
    last = float(load_csv(traces["long"]).rate_scaled_to_peak(5.0).arrival_s[-1])
    stack = _stack(tmp_path, "cut", 5.0, (6, 6), ["us-east-1a", "us-east-1b", "us-east-1c"])
    for at in (120, 900):
        _, doc = _run(capsys, str(stack), "--trace", str(traces["long"]), "--zone-loss", f"us-east-1a@{at}")
        item = _item(doc, "zone loss")
        window = item["figures"]["window_s"]
        assert window == pytest.approx(707.0 + 90.0, abs=0.5)
        seen = window if at == 120 else last - 900
        assert item["figures"]["window_seen_s"] == pytest.approx(seen, abs=1e-3)
        said = f"the trace ends {seen:.0f} s into that window"
        assert (said in item["detail"]) == (at == 900)


def test_losing_the_fullest_zone_names_the_zone_it_took(
        tmp_path: Path, traces: dict[str, Path], capsys) -> None:
    """Six replicas over three zones run two a zone when the loss comes: a tie, so the fullest is
    the first listed, us-east-1a, and the run is the one that names it."""
    stack = _stack(tmp_path, "z", 5.0, (6, 6), ["us-east-1a", "us-east-1b", "us-east-1c"])
    _, chosen = _run(capsys, str(stack), "--trace", str(traces["long"]), "--zone-loss", "fullest@120")
    _, named = _run(capsys, str(stack), "--trace", str(traces["long"]), "--zone-loss", "us-east-1a@120")
    (run,), (same,) = chosen["models"], named["models"]
    assert run["zone_loss"] == {"zone": "us-east-1a", "at_s": 120.0, "chosen": True}
    assert same["zone_loss"]["chosen"] is False
    assert _item(chosen, "zone loss")["figures"] == _item(named, "zone loss")["figures"]
    assert _item(chosen, "zone loss")["detail"].startswith("zone us-east-1a lost at 120 s:")


@pytest.mark.parametrize(("replicas", "pages"), [((3, 3), False), ((6, 6), True)])
def test_a_replacement_that_finds_no_node_pages_as_overdue(
        tmp_path: Path, traces: dict[str, Path], capsys, replicas: tuple[int, int], pages: bool) -> None:
    """The replicas-overdue page over the same zone losses: the lost pods are evicted 90 s after
    the loss at 120 s, and their replacements are created then (210 s). With a free slot they serve;
    without one they stay Pending, and the page fires at the first evaluation (every 30 s) past
    210 s + W, plus its 2 minutes, W being the pod's cold start with a new node (by hand: node
    provisioning and init, then 1.5x the pull, weights and engine start)."""
    stack = _stack(tmp_path, "o", 5.0, replicas, ["us-east-1a", "us-east-1b", "us-east-1c"])
    args = [str(stack), "--trace", str(traces["hour"]), "--zone-loss", "us-east-1a@120"]
    _, doc = _run(capsys, *args)
    (run,) = doc["models"]
    cold = next(m.cold_start for m in plan_of("dev").models if m.model == "llama-1b")
    window = math.ceil(cold.node_provisioning_s + cold.node_init_s
                       + 1.5 * (cold.image_pull_s + cold.weights_load_s + cold.engine_start_s))
    page = run["replicas_overdue"]
    assert page["alert"] == "RtipReplicasOverdue" and page["not_ready_window_s"] == window
    expected = 30 * (math.floor((210 + window) / 30) + 1) + 120
    assert page["first_fired_s"] == (expected if pages else None)
    main(["simulate", *args])
    said = " ".join(capsys.readouterr().out.split())
    assert (f"paged at {expected} s" if pages else "did not page") in said


def test_the_text_report_says_what_the_json_holds(tmp_path: Path, traces: dict[str, Path], capsys) -> None:
    """The terminal report's cost and alert lines carry the run's own figures."""
    stack = _stack(tmp_path, "z", 5.0, (3, 3), ["us-east-1a", "us-east-1b", "us-east-1c"])
    args = [str(stack), "--trace", str(traces["long"]), "--zone-loss", "fullest@120"]
    _, doc = _run(capsys, *args)
    (run,) = doc["models"]
    main(["simulate", *args])
    text = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    f = run["figures"]
    assert f"(whole nodes {f['node_gpu_hours']:.3f}, packed {f['packed_node_gpu_hours']:.3f})" in text
    w = f["worst_minute"]
    assert (f"worst clock minute from {w['t_s']:.0f} s: TTFT p99 {w['ttft_p99_s']:.3f} s, TPOT p99 "
            f"{w['tpot_p99_s']:.3f} s; {w['minutes_over']} of {w['minutes']} minutes over the tier") in text
    assert w["minutes"] == len(f["latency_series"]["t"])
    fired = [a for a in run["slo_alerts"] if a["first_fired_s"] is not None]
    said = "SLO burn-rate alerts (its PrometheusRule, evaluated every 30 s): "
    assert said + ("none fired" if not fired else f"{fired[0]['severity']} ") in text
    assert 0 < f["packed_node_gpu_hours"] <= f["node_gpu_hours"]


def test_the_json_has_every_figure(tmp_path: Path, traces: dict[str, Path], capsys) -> None:
    # Time scaling keeps every request of the file (rate scaling, the default, adds or drops some).
    _, doc = _run(capsys, "dev", "--trace", str(traces["short"]), "--model", "llama-1b", "--scale", "time")
    (run,) = doc["models"]
    f = run["figures"]
    for metric in ("ttft", "tpot"):
        p50, p95, p99 = (f[f"{metric}_p{q}_s"] for q in (50, 95, 99))
        assert 0 < p50 <= p95 <= p99
    assert 0 <= f["attainment"] <= 1
    assert f["requests"] == run["trace"]["requests"] == len(load_csv(traces["short"]))
    assert f["replicas"]["min"] <= f["replicas"]["mean"] <= f["replicas"]["max"]
    assert {"count", "mean_s", "max_s"} <= set(f["time_to_scale"])
    assert 0 < f["gpu_utilization"] <= 1 and f["gpu_hours"] > 0 and f["node_gpu_hours"] >= f["gpu_hours"]
    series = f["series"]
    assert {"t", "ready", "starting", "waiting", "running", "gpu_util"} <= set(series)
    assert len({len(v) for v in series.values()}) == 1
    assert [i["item"].split()[0] for i in run["checklist"]] == ["p99", "cold-start", "GPU", "zone"]
    inputs = run["inputs"]
    # dev's L4 pool time-sliced two ways: a share sees the whole 24 GB L4 and vLLM gets 0.9 / 2 of
    # it; the L4 is below 70 GiB, so vLLM 0.11's defaults are 2048 tokens and 256 sequences.
    assert inputs["gpu_memory_utilization"] == pytest.approx(0.45)
    assert (inputs["max_num_batched_tokens"], inputs["max_num_seqs"]) == (2048, 256)
    card = CATALOG["llama-3.2-1b-instruct"]
    # Less vLLM's profile-run reserve (serving.activation), by hand for 2048 tokens, 256 sequences:
    # sampler 256 x 128,256 vocab x 4 B + 2048 x 2048 hidden x 2 B = 139,722,752 B, above the
    # MLP's 2048 x 3 x 8192 x 2 B + 2 x 2048 x 2048 x 2 B = 117,440,512 B.
    expect_kv = int((24 * 0.45 - card.variant_weights_gb(profile(card, SliceKind(GpuModel.L4)).quantization)
                     - 0.139722752) * 1e9 // card.kv_bytes_per_token)
    assert inputs["kv_tokens"] == expect_kv


def test_plot_writes_a_png(tmp_path: Path, traces: dict[str, Path], capsys) -> None:
    out = tmp_path / "run.png"
    main(["simulate", "dev", "--trace", str(traces["short"]), "--model", "llama-1b", "--plot", str(out)])
    capsys.readouterr()
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rate_scaling_is_the_default_and_keeps_the_clock(traces: dict[str, Path], capsys) -> None:
    # The short file at the dev model's peak: rate scaling keeps its span (to a 10 s bin) and
    # changes the request count by the ratio of the peaks; time scaling keeps the count and
    # stretches the clock (the file's busiest minute is above the model's peak).
    rows = load_csv(traces["short"])
    _, rate = _run(capsys, "dev", "--trace", str(traces["short"]), "--model", "llama-1b")
    _, time = _run(capsys, "dev", "--trace", str(traces["short"]), "--model", "llama-1b", "--scale", "time")
    peak = rate["models"][0]["peak_qps"]
    assert abs(rate["models"][0]["trace"]["duration_s"] - rows.duration_s) <= 10.0
    expected = len(rows) * peak / rows.peak_qps()
    assert abs(rate["models"][0]["trace"]["requests"] - expected) <= 0.05 * expected
    assert time["models"][0]["trace"]["requests"] == len(rows)
    assert time["models"][0]["trace"]["duration_s"] > rows.duration_s  # stretched to a lower peak


def test_jsonl_traces_load(tmp_path: Path, traces: dict[str, Path], capsys) -> None:
    rows = load_csv(traces["short"])
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": float(t), "input_tokens": PROMPT,
                                        "output_tokens": OUTPUT}) + "\n" for t in rows.arrival_s))
    _, doc = _run(capsys, "dev", "--trace", str(path), "--model", "llama-1b", "--scale", "time")
    assert doc["models"][0]["trace"]["requests"] == len(rows)


@pytest.mark.parametrize(("args", "words"), [
    (["--model", "gpt-5"], "model 'gpt-5' is not in this stack"),
    (["--zone-loss", "us-east-1a"], "expected ZONE@SECONDS"),
    (["--zone-loss", "us-east-1a@soon"], "expected ZONE@SECONDS"),
    (["--zone-loss", "eu-west-1a@60"], "not one of"),
    (["--zone-loss", "us-east-1a@99999"], "the run's trace lasts"),
])
def test_bad_arguments_exit_2(traces: dict[str, Path], capsys, args: list[str], words: str) -> None:
    assert main(["simulate", "dev", "--trace", str(traces["short"]), *args]) == 2
    captured = capsys.readouterr()
    assert words in captured.err and "Traceback" not in captured.err and captured.out == ""


def test_unreadable_traces_exit_2(tmp_path: Path, capsys) -> None:
    garbage = tmp_path / "g.csv"
    garbage.write_text("when,what\n1,2\n")
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    for path, words in ((tmp_path / "missing.csv", "No such file"), (garbage, "missing column"),
                        (binary, "--trace")):
        assert main(["simulate", "dev", "--trace", str(path)]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err


def test_an_unknown_stack_exits_2(traces: dict[str, Path], capsys) -> None:
    assert main(["simulate", "no-such-stack", "--trace", str(traces["short"])]) == 2
    assert "Traceback" not in capsys.readouterr().err
