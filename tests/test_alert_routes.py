"""Where the SLO alerts go (serving/alert_routes.py), checked by Alertmanager's own amtool on the
configuration the chart would render, and by the network policies that must let it out."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from rtip import chartfacts, offline
from rtip.deploycheck.alerts import check_alerts, problems
from rtip.stackfile import load
from serving import alert_routes
from serving.slo_rules import ABSENT_ALERT, ALERT
from tests import promtool
from tests.conftest import SHARED, record_of, spec_of, stack_doc, write_stack
from tests.test_bad_input import plan_fails
from tests.test_netpol import Endpoint, cluster_policies, reach

CHART_VALUES = SHARED / "charts" / "kube-prometheus-stack" / "88.5.3" / "values.yaml"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _coalesce(base: Any, over: Any) -> Any:
    """Helm's values merge: maps merge key by key, anything else (lists included) is replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        return {k: _coalesce(base[k], over[k]) if k in base and k in over else over.get(k, base.get(k))
                for k in {**base, **over}}
    return copy.deepcopy(over)


def _releases(stack: str) -> list[Any]:
    return [r for r in record_of(stack).by_type(RELEASE) if r.inputs["name"] == "kube-prometheus-stack"]


def _alertmanager_config(stack: str) -> dict[str, Any]:
    """`alertmanager.config` as Helm renders it for the stack's first cluster: the chart's default
    under the release's values."""
    chart = yaml.safe_load(CHART_VALUES.read_text())["alertmanager"]
    (release, *_) = _releases(stack)
    return _coalesce(chart, release.inputs["values"].get("alertmanager", {}))["config"]


def _route(config: dict[str, Any], folder: Path, labels: dict[str, str]) -> str:
    """The receiver amtool routes an alert with `labels` to, once `check-config` has read the
    configuration as it is (webhooks reading their URL from a file included)."""
    path = folder / "alertmanager.yaml"
    path.write_text(yaml.safe_dump(config))
    done = promtool.amtool(["check-config", path.name], folder)
    assert done.returncode == 0, done.stdout + done.stderr
    done = promtool.amtool(["config", "routes", "test", "--config.file", path.name,
                            *(f"{k}={v}" for k, v in labels.items())], folder)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def _alert(severity: str) -> dict[str, str]:
    return {"alertname": ALERT, "severity": severity, "model": "llama-8b", "tier": "interactive"}


def test_prod_pages_and_tickets_reach_their_webhooks_and_nothing_else_changes(tmp_path: Path) -> None:
    config = _alertmanager_config("prod")
    assert set(spec_of("prod").alert_webhooks) == {"page", "ticket"}
    assert _route(config, tmp_path, _alert("page")) == "rtip-slo-page"
    assert _route(config, tmp_path, _alert("ticket")) == "rtip-slo-ticket"
    assert _route(config, tmp_path, {**_alert("page"), "alertname": ABSENT_ALERT}) == "rtip-slo-page"
    # prod names a heartbeat for every region: the chart's Watchdog goes there.
    assert _route(config, tmp_path, {"alertname": "Watchdog", "severity": "none"}) == "rtip-heartbeat"
    # The chart's alerts for notifications that failed to send reach both SLO receivers, so a
    # broken page webhook is ticketed and a broken ticket webhook paged.
    for failed in ("AlertmanagerFailedToSendAlerts", "AlertmanagerClusterFailedToSendAlerts"):
        labels = {"alertname": failed, "integration": "webhook", "severity": "warning"}
        assert _route(config, tmp_path, labels) == "rtip-slo-page,rtip-slo-ticket"
    # The chart's own routing stays otherwise: every other alert to `null`, its inhibit rules kept.
    assert _route(config, tmp_path, {"alertname": "KubePodCrashLooping", "severity": "warning"}) == "null"
    chart = yaml.safe_load(CHART_VALUES.read_text())["alertmanager"]["config"]
    assert config["inhibit_rules"] == chart["inhibit_rules"] and config["route"]["receiver"] == "null"


def test_every_alert_the_plan_fires_reaches_the_receiver_of_its_severity(tmp_path: Path) -> None:
    """Each alert in prod's own PrometheusRules (every model's and gateway's), with its labels,
    as amtool routes it through the rendered config: a page to rtip-slo-page, a ticket to
    rtip-slo-ticket, none to the chart's `null`."""
    config = _alertmanager_config("prod")
    fired = {(rule["alert"], rule["labels"]["severity"])
             for r in record_of("prod").resources if r.inputs.get("kind") == "PrometheusRule"
             for group in r.inputs["spec"]["groups"] for rule in group["rules"] if "alert" in rule}
    assert {name for name, _ in fired} >= {ALERT, ABSENT_ALERT, "RtipAutoscalerBlind",
                                           "RtipAutoscalerQueryFailing", "RtipGatewayAvailabilityBurn"}
    for name, severity in sorted(fired):
        routed = _route(config, tmp_path, {"alertname": name, "severity": severity})
        assert routed == f"rtip-slo-{severity}", name


def test_amtool_reads_the_webhook_bodies_it_passes(tmp_path: Path) -> None:
    """The check above reads each receiver's webhook as emitted: the same config with a webhook
    naming both a URL and a URL file, or neither, is refused (Alertmanager's config.go takes
    exactly one), so a receiver amtool could not load would fail the test, not pass unread."""
    config = _alertmanager_config("prod")
    path = tmp_path / "alertmanager.yaml"
    for both in (True, False):
        broken = copy.deepcopy(config)
        (hook,) = next(r for r in broken["receivers"] if r["name"] == "rtip-slo-page")["webhook_configs"]
        if both:
            hook["url"] = "https://hooks.invalid/slo"
        else:
            del hook["url_file"]
        path.write_text(yaml.safe_dump(broken))
        done = promtool.amtool(["check-config", path.name], tmp_path)
        said = done.stdout + done.stderr
        why = "at most one of url" if both else "one of url or url_file"
        assert done.returncode != 0 and why in said, said


def test_without_webhooks_the_alerts_notify_no_one(tmp_path: Path) -> None:
    """dev names no webhook: the chart's routing is untouched and the SLO alerts reach `null`."""
    assert spec_of("dev").alert_webhooks == {}
    config = _alertmanager_config("dev")
    assert config == yaml.safe_load(CHART_VALUES.read_text())["alertmanager"]["config"]
    assert _route(config, tmp_path, _alert("page")) == "null"


def test_each_receiver_reads_its_url_from_the_secret_alertmanager_mounts() -> None:
    """Every `url_file` is a key of the Secret the release mounts (the operator mounts
    `alertmanagerSpec.secrets` at /etc/alertmanager/secrets/<name>/), the Secret is in the
    release's namespace with its values kept secret, and the release waits for it."""
    record = record_of("prod")
    (release, *_) = _releases("prod")
    values = release.inputs["values"]["alertmanager"]
    assert values["alertmanagerSpec"]["secrets"] == [alert_routes.RECEIVER_SECRET]
    files = {h["url_file"] for r in values["config"]["receivers"] for h in r.get("webhook_configs", [])}
    mounted = f"/etc/alertmanager/secrets/{alert_routes.RECEIVER_SECRET}"
    assert files == {f"{mounted}/{s}" for s in ("page", "ticket", "heartbeat")}
    secrets = [r for r in record.by_type("kubernetes:core/v1:Secret")
               if r.inputs["metadata"]["name"] == alert_routes.RECEIVER_SECRET
               and r.provider == release.provider]
    assert len(secrets) == 1
    assert secrets[0].inputs["metadata"]["namespace"] == release.inputs["namespace"]
    assert secrets[0].inputs["stringData"] == "[secret]"
    assert secrets[0].urn in release.dependencies


def test_every_alert_names_the_cluster_and_region_it_comes_from() -> None:
    """prod's four regions post to the same webhooks: each Prometheus labels its alerts with its
    cluster and region (`externalLabels`), and notifications are grouped per cluster."""
    labels = [r.inputs["values"]["prometheus"]["prometheusSpec"]["externalLabels"] for r in _releases("prod")]
    regions = [r.region for r in spec_of("prod").regions]
    assert sorted(x["region"] for x in labels) == sorted(regions)
    assert len({x["cluster"] for x in labels}) == len(regions)
    routes = _alertmanager_config("prod")["route"]["routes"]
    slo = [r for r in routes if r["receiver"].startswith("rtip-slo-")]
    assert slo and all("cluster" in r["group_by"] for r in slo)


def test_the_pinned_alertmanager_reads_webhook_urls_from_files() -> None:
    """`url_file` on a webhook needs Alertmanager 0.26 or newer; older ones drop it (operator
    `webhookConfig.sanitize`), which would leave a receiver with no URL."""
    tag = yaml.safe_load(CHART_VALUES.read_text())["alertmanager"]["alertmanagerSpec"]["image"]["tag"]
    major, minor, *_ = (int(x) for x in tag.lstrip("v").split("."))
    assert (major, minor) >= (0, 26), tag


WEBHOOK = Endpoint("34.120.54.55")  # a webhook service's address: outside every stack network
ALERTMANAGER = Endpoint("10.20.1.11", "monitoring", {"app.kubernetes.io/name": "alertmanager"})
PROMETHEUS = Endpoint("10.20.1.10", "monitoring", {"app.kubernetes.io/name": "prometheus"})


def test_only_alertmanager_may_reach_the_webhooks_and_only_where_a_stack_names_them() -> None:
    prod, dev = cluster_policies(record_of("prod"), "aws"), cluster_policies(record_of("dev"), "aws")
    assert reach(prod, ALERTMANAGER, WEBHOOK, 443)
    assert not reach(prod, ALERTMANAGER, WEBHOOK, 80)
    assert not reach(prod, PROMETHEUS, WEBHOOK, 443)
    assert not reach(dev, ALERTMANAGER, WEBHOOK, 443)


@pytest.mark.parametrize(("webhooks", "path", "words"), [
    ({"pager": "hook"}, "alert_webhooks.pager", "expected 'page' or 'ticket'"),
    ({"page": ""}, "alert_webhooks.page", "must not be empty"),
])
def test_bad_webhooks_are_named(tmp_path: Path, capsys, webhooks: dict[str, str], path: str,
                                words: str) -> None:
    platform = {**stack_doc("dev")["config"]["rtip:platform"], "alert_webhooks": webhooks}
    err = plan_fails(capsys, write_stack(tmp_path, platform))
    assert f"rtip:platform.{path}:" in err and words in err


def test_a_webhook_secret_the_stack_does_not_hold_is_named(tmp_path: Path, capsys) -> None:
    platform = {**stack_doc("dev")["config"]["rtip:platform"], "alert_webhooks": {"page": "pagerHook"}}
    path = write_stack(tmp_path, platform)
    doc = yaml.safe_load(path.read_text())
    del doc["config"]["rtip:pagerHook"]  # write_stack gives every named secret a value
    path.write_text(yaml.safe_dump(doc))
    err = plan_fails(capsys, path)
    assert ("rtip:platform.alert_webhooks.page: names config value 'rtip:pagerHook', which the stack "
            "does not set") in err


def test_the_plan_checks_the_facts_the_routing_rests_on() -> None:
    """rtip plan's deploy-time check finds nothing in prod, and names each defect a release could
    carry: a chart route dropped, a URL file outside every mounted Secret, an Alertmanager too old
    for `url_file` (0.26: the operator's `webhookConfig.sanitize`)."""
    assert check_alerts(record_of("prod")) == []
    facts = chartfacts.for_release("kube-prometheus-stack", "88.5.3")
    assert facts is not None
    (release, *_) = _releases("prod")
    chart_config = facts.defaults["alertmanager"]["config"]
    good = facts.values(release.inputs["values"])["alertmanager"]
    assert problems(good, chart_config) == []
    bad = copy.deepcopy(good)
    bad["config"]["route"]["routes"] = bad["config"]["route"]["routes"][1:]  # Watchdog's
    bad["alertmanagerSpec"]["secrets"] = ["other"]
    bad["alertmanagerSpec"]["image"]["tag"] = "v0.25.0"
    found = problems(bad, chart_config)
    assert len(found) == 5, found  # the route, three URL files, the version
    assert "Watchdog" in found[0] and "/etc/alertmanager/secrets/other/" in found[1] and "0.26" in found[4]
    # prod's Watchdog route goes to its heartbeat, not the chart's `null`: same matchers, so kept.
    chart_watchdog, = chart_config["route"]["routes"]
    ours = good["config"]["route"]["routes"][0]
    assert ours["receiver"] != chart_watchdog["receiver"] and ours["matchers"] == chart_watchdog["matchers"]


@pytest.mark.parametrize(("stack", "said"), [
    ("prod", "page to the webhook in secret sloPageWebhook, ticket to the webhook in secret "
             "sloTicketWebhook; Watchdog heartbeat per cluster to us-east-1: secret heartbeatUsEast1, "
             "us-west-2: secret heartbeatUsWest2, us-central1: secret heartbeatUsCentral1, "
             "eastus: secret heartbeatEastus"),
    ("dev", "no alert_webhooks, so they reach Alertmanager and notify no one; Watchdog to no one"),
])
def test_rtip_plan_says_where_the_alerts_go(stack: str, said: str) -> None:
    """The names are the stack files' own (stacks/Pulumi.prod.yaml names both webhooks and four
    heartbeats; dev none)."""
    import io

    from rich.console import Console

    from rtip import report
    from tests.conftest import plan_of

    doc = report.document(plan_of(stack), record_of(stack))
    assert doc["alert_webhooks"] == stack_doc(stack)["config"]["rtip:platform"].get("alert_webhooks", {})
    out = io.StringIO()
    report.print_tables(doc, Console(file=out, width=400))
    assert (f"SLO alerts (latency burn per model, serving/slo_rules.py; the gateway's availability, "
            f"serving/gateway_slo.py): {said}") in out.getvalue()
    platform = stack_doc(stack)["config"]["rtip:platform"]
    assert doc["heartbeat_webhooks"] == platform.get("heartbeat_webhooks", {})
    if stack == "prod":
        # The tier table's last column, by hand from vLLM 0.11's buckets: interactive 500 ms TTFT
        # is a bucket, 30 ms TPOT reads at 25; standard 2 s reads at 1.0 s, 100 ms is a bucket.
        assert "alerts: a miss past (ms)" in out.getvalue()
        assert "500 / 25" in out.getvalue() and "1000 / 100" in out.getvalue()


# --- the heartbeat: each cluster's Watchdog to its own dead man's switch -------------------------

def test_each_region_pings_its_own_switch_and_only_it() -> None:
    """cluster_webhooks gives a region the stack's SLO webhooks and its own heartbeat alone."""
    shared = {"page": "P", "ticket": "T"}
    beats = {"us-east-1": "H1", "eastus": "H2"}
    assert alert_routes.cluster_webhooks(shared, beats, "eastus") == {
        "page": "P", "ticket": "T", "heartbeat": "H2"}
    assert alert_routes.cluster_webhooks(shared, {}, "eastus") == shared
    # In prod every cluster's release routes Watchdog to a heartbeat receiver reading its URL file.
    for release in _releases("prod"):
        am = release.inputs["values"]["alertmanager"]
        watchdog = am["config"]["route"]["routes"][0]
        assert watchdog["matchers"] == ['alertname = "Watchdog"'] and watchdog["receiver"] == "rtip-heartbeat"
        beat = next(r for r in am["config"]["receivers"] if r["name"] == "rtip-heartbeat")
        (hook,) = beat["webhook_configs"]
        assert hook["url_file"].endswith("/heartbeat")


def _ping_gaps(group_wait: float, group_interval: float, repeat: float, sends: int = 6) -> list[float]:
    """Alertmanager's aggregation group, by hand (dispatch.go): the first flush after group_wait,
    then one every group_interval; a flush notifies again once repeat_interval has passed since
    the last send, whose time is logged when the POST returns (a little after the flush)."""
    post_s = 0.05
    flush, last, gaps = group_wait, None, []
    while len(gaps) < sends:
        if last is None or flush - last >= repeat:
            if last is not None:
                gaps.append(flush + post_s - last)
            last = flush + post_s
        flush += group_interval
    return gaps


def _seconds(duration: str) -> float:
    return float(duration[:-1]) * {"s": 1, "m": 60}[duration[-1]]


def test_the_heartbeat_pings_about_every_two_minutes_and_never_says_resolved() -> None:
    """With prod's timing the pings come every 2 minutes (not every one: the flush one interval
    after a send finds a little less than repeat_interval gone, alertmanager#676), well inside
    the 5-minute period the docs give the switch. A 'resolved' post (sent once Prometheus stops
    and the alert's EndsAt passes) would read as one more ping."""
    config = _alertmanager_config("prod")
    watchdog = config["route"]["routes"][0]
    timing = [_seconds(watchdog[k]) for k in ("group_wait", "group_interval", "repeat_interval")]
    gaps = _ping_gaps(*timing)
    assert all(g == pytest.approx(120.0) for g in gaps), gaps
    assert 2 * max(gaps) <= 300  # two pings missed before a 5-minute switch pages
    (hook,) = next(r for r in config["receivers"] if r["name"] == "rtip-heartbeat")["webhook_configs"]
    assert hook["send_resolved"] is False
    pages = [h for r in config["receivers"] if r["name"].startswith("rtip-slo-")
             for h in r["webhook_configs"]]
    assert pages and all(h["send_resolved"] for h in pages)


def test_a_heartbeat_alone_routes_only_watchdog(tmp_path: Path) -> None:
    """A stack with heartbeats and no SLO webhooks: Watchdog to the switch, the SLO pages to
    `null` as before, and Alertmanager may reach 443 outside the network."""
    platform = copy.deepcopy(stack_doc("dev")["config"]["rtip:platform"])
    platform["heartbeat_webhooks"] = {r["region"]: f"beat{i}" for i, r in enumerate(platform["regions"])}
    path = write_stack(tmp_path, platform, extra={f"rtip:beat{i}": {"secure": "v1:x"}
                                                  for i in range(len(platform["regions"]))})
    record = offline.run(load(str(path)))
    (release, *_) = [r for r in record.by_type(RELEASE) if r.inputs["name"] == "kube-prometheus-stack"]
    chart = yaml.safe_load(CHART_VALUES.read_text())["alertmanager"]
    config = _coalesce(chart, release.inputs["values"]["alertmanager"])["config"]
    assert _route(config, tmp_path, {"alertname": "Watchdog", "severity": "none"}) == "rtip-heartbeat"
    assert _route(config, tmp_path, _alert("page")) == "null"
    assert reach(cluster_policies(record, "aws"), ALERTMANAGER, WEBHOOK, 443)


@pytest.mark.parametrize(("beats", "path", "words"), [
    ({"us-east-1": "b1", "mars-1": "b2"}, "heartbeat_webhooks.mars-1",
     "region 'mars-1' is not in this stack"),
    ({"us-east-1": "b1", "us-west-2": "b1"}, "heartbeat_webhooks.us-west-2",
     "named for more than one region"),
    ({"us-east-1": "b1"}, "heartbeat_webhooks", "names no heartbeat for us-west-2"),
    ({"us-east-1": "sloPageWebhook", "us-west-2": "b2", "us-central1": "b3", "eastus": "b4"},
     "heartbeat_webhooks.us-east-1", "is also an alert_webhooks URL"),
])
def test_bad_heartbeats_are_named(tmp_path: Path, capsys, beats: dict[str, str], path: str,
                                  words: str) -> None:
    """prod's regions: us-east-1, us-west-2, us-central1, eastus."""
    platform = {**stack_doc("prod")["config"]["rtip:platform"], "heartbeat_webhooks": beats}
    err = plan_fails(capsys, write_stack(tmp_path, platform))
    assert f"rtip:platform.{path}:" in err and words in err
