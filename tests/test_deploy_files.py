"""Static checks of deploy/ and grafana/: files parse, paths exist, names agree with the code.

Nothing here needs Docker, Kubernetes, Prometheus or Grafana; tests/test_prometheus.py runs the
dashboard and alert queries against a real Prometheus.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from gateway import __version__
from gateway.config import env_var_names
from gateway.memory.policy import parse_policy
from gateway.observability.metrics import Metrics

pytestmark = pytest.mark.unit  # no Redis, servers or browsers

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
GRAFANA = ROOT / "grafana"
K8S = DEPLOY / "k8s"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
DATASOURCE_FILE = GRAFANA / "provisioning" / "datasources" / "prometheus.yaml"
PROVIDER_FILE = GRAFANA / "provisioning" / "dashboards" / "memgate.yaml"

# Grafana's global variables a query may use; anything else must be a dashboard variable.
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__range", "__range_s", "__interval_ms"}
METRIC_NAME = re.compile(r"memgate_[a-z_]+")
HISTOGRAM_SUFFIX = re.compile(r"_(bucket|sum|count)$")


# --- helpers shared with tests/test_prometheus.py ------------------------------------------


def yaml_files() -> list[Path]:
    return sorted(
        p for base in (DEPLOY, GRAFANA) for p in base.rglob("*") if p.suffix in {".yml", ".yaml"}
    )


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_dashboard(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, expr) for every query of every panel."""
    out = []
    for path in DASHBOARDS:
        for panel in load_dashboard(path)["panels"]:
            for target in panel.get("targets", []):
                out.append((path.name, panel["title"], target["expr"]))
    return out


def alert_rules() -> list[dict[str, Any]]:
    doc = load_yaml(DEPLOY / "alerts.yml")
    return [rule for group in doc["groups"] for rule in group["rules"]]


def compose() -> dict[str, Any]:
    return load_yaml(DEPLOY / "docker-compose.yml")


def k8s_manifests() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                out.append((path, doc))
    return out


def exposed_metric_names() -> dict[str, str]:
    """Every metric ``Metrics.render()`` declares (its ``# TYPE`` lines) -> type.

    Counters are named with ``_total`` as exposed; histograms by their base name. The TYPE
    lines are used rather than samples because some series (requests by code) only appear
    after the first request.
    """
    payload, _ = Metrics("test").render()
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", payload.decode(), re.M))


def used_metric_names(expr: str) -> set[str]:
    return set(METRIC_NAME.findall(expr))


# --- YAML parses ---------------------------------------------------------------------------


def test_there_are_yaml_files() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in yaml_files()}
    assert {
        "deploy/docker-compose.yml",
        "deploy/prometheus.yml",
        "deploy/alerts.yml",
        "deploy/k8s/kustomization.yaml",
        "grafana/provisioning/datasources/prometheus.yaml",
        "grafana/provisioning/dashboards/memgate.yaml",
    } <= names


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_yaml_parses(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs, f"{path} is empty"
    for doc in docs:
        assert isinstance(doc, dict), path


def test_no_machine_specific_paths() -> None:
    files = [*yaml_files(), *DASHBOARDS, DEPLOY / "Dockerfile", DEPLOY / "README.md"]
    for path in files:
        text = path.read_text()
        # Home, user and scratch folders that only exist on one machine (spelt out in parts so
        # this file does not itself trip the same check on the repository).
        for marker in ("/" + d + "/" for d in ("home", "Users", "wo" + "rk", "tmp")):
            assert marker not in text, (path, marker)


# --- Dockerfile ----------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile() -> None:
    instructions = dockerfile_instructions()
    froms = [rest for word, rest in instructions if word == "FROM"]
    assert froms and froms[0].startswith("python:3.11-slim")
    runs = " ".join(rest for word, rest in instructions if word == "RUN")
    assert "pip install ." in runs
    cmd = [rest for word, rest in instructions if word == "CMD"][-1]
    assert json.loads(cmd) == ["memgate", "serve", "--host", "0.0.0.0", "--port", "8080"]
    env = " ".join(rest for word, rest in instructions if word == "ENV")
    assert "MEMGATE_REDIS_URL=redis://redis:6379" in env


def test_dockerfile_copy_sources_exist_and_are_in_the_build_context() -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    reincluded = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copies = [rest for word, rest in dockerfile_instructions() if word == "COPY"]
    assert copies
    sources = []
    for rest in copies:
        parts = [p for p in rest.split() if not p.startswith("--")]
        sources.extend(parts[:-1])
    # the policy is package data: `pip install .` carries it, nothing else is copied for it
    assert "policies/" not in sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY source {source} missing from the repo"
        assert source.rstrip("/") in reincluded, f"{source} excluded by Dockerfile.dockerignore"


# --- docker compose ------------------------------------------------------------------------


def bind_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            out.append((source, target))
    return out


def test_compose_services() -> None:
    services = compose()["services"]
    assert set(services) >= {"memgate", "redis", "prometheus", "grafana"}
    assert services["redis"]["image"].startswith("redis:8")
    build = services["memgate"]["build"]
    context = (DEPLOY / build["context"]).resolve()
    assert context == ROOT
    assert (context / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
    env = services["memgate"]["environment"]
    assert env["MEMGATE_REDIS_URL"].startswith("redis://redis:")
    assert "redis" in services["memgate"]["depends_on"]


def test_compose_mounts_exist() -> None:
    services = compose()["services"]
    mounts = {name: dict(bind_mounts(svc)) for name, svc in services.items()}
    for name, pairs in mounts.items():
        for source in pairs:
            assert (DEPLOY / source).exists(), f"{name}: mount source {source} missing"
    assert mounts["prometheus"]["./prometheus.yml"] == "/etc/prometheus/prometheus.yml"
    assert mounts["prometheus"]["./alerts.yml"] == "/etc/prometheus/alerts.yml"
    assert mounts["grafana"]["../grafana/provisioning"] == "/etc/grafana/provisioning"
    assert "../grafana/dashboards" in mounts["grafana"]


def test_grafana_provider_path_is_the_mounted_dashboards_folder() -> None:
    target = dict(bind_mounts(compose()["services"]["grafana"]))["../grafana/dashboards"]
    providers = load_yaml(PROVIDER_FILE)["providers"]
    assert [p["options"]["path"] for p in providers] == [target]
    assert all(p["type"] == "file" for p in providers)
    home = compose()["services"]["grafana"]["environment"].get(
        "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"
    )
    if home:
        path = PurePosixPath(home)
        assert str(path.parent) == target and (GRAFANA / "dashboards" / path.name).exists()


def test_prometheus_config() -> None:
    config = load_yaml(DEPLOY / "prometheus.yml")
    for rule_file in config["rule_files"]:
        assert (DEPLOY / rule_file).exists(), rule_file
    # the rule files resolve next to the config inside the container, where compose mounts them
    container_dir = PurePosixPath("/etc/prometheus")
    mounted = set(dict(bind_mounts(compose()["services"]["prometheus"])).values())
    for rule_file in config["rule_files"]:
        assert str(container_dir / rule_file) in mounted
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    memgate = jobs["memgate"]
    assert memgate["scrape_interval"] == "5s"
    assert memgate.get("metrics_path", "/metrics") == "/metrics"
    targets = [t for sc in memgate["static_configs"] for t in sc["targets"]]
    assert targets == ["memgate:8080"]


# --- environment variables -----------------------------------------------------------------


def test_deploy_files_use_only_known_env_vars() -> None:
    known = set(env_var_names())
    for path in [*DEPLOY.rglob("*"), *GRAFANA.rglob("*")]:
        if path.is_file():
            for name in re.findall(r"MEMGATE_[A-Z_]+[A-Z]", path.read_text()):
                assert name in known, f"{path.relative_to(ROOT)} uses unknown {name}"


# --- Kubernetes ----------------------------------------------------------------------------


def test_k8s_manifests_have_identity() -> None:
    manifests = k8s_manifests()
    assert manifests
    for path, doc in manifests:
        assert doc.get("apiVersion"), path
        assert doc.get("kind"), path
        assert doc.get("metadata", {}).get("name"), path


def test_kustomization_lists_every_manifest() -> None:
    kustomization = load_yaml(K8S / "kustomization.yaml")
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed))
    for name in listed:
        assert (K8S / name).exists(), name
    present = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(listed) == present


def by_kind() -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for _, doc in k8s_manifests():
        out.setdefault(doc["kind"], []).append(doc)
    return out


def test_k8s_objects_fit_together() -> None:
    kinds = by_kind()
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "ConfigMap", "Secret"} <= set(kinds)
    (deployment,) = kinds["Deployment"]
    config_maps = {c["metadata"]["name"]: c for c in kinds["ConfigMap"]}
    (secret,) = kinds["Secret"]
    (hpa,) = kinds["HorizontalPodAutoscaler"]
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (container,) = pod["spec"]["containers"]

    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"]["cpu"]
    assert container["resources"]["requests"]["memory"]
    refs = {
        ("ConfigMap", e["configMapRef"]["name"])
        if "configMapRef" in e
        else ("Secret", e["secretRef"]["name"])
        for e in container["envFrom"]
    }
    settings_maps = [name for kind, name in refs if kind == "ConfigMap"]
    assert len(settings_maps) == 1
    config_map = config_maps[settings_maps[0]]
    assert refs == {("ConfigMap", settings_maps[0]), ("Secret", secret["metadata"]["name"])}
    # settings alone in envFrom: every key is a setting the gateway knows
    assert set(config_map["data"]) <= set(env_var_names()), set(config_map["data"])

    # the policy file: in its own ConfigMap, mounted as a file, MEMGATE_POLICY points at it
    policy_path = config_map["data"]["MEMGATE_POLICY"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    policy_mounts = [
        m
        for m in mounts.values()
        if volumes[m["name"]].get("configMap", {}).get("name") in config_maps
    ]
    assert len(policy_mounts) == 1, "the policy ConfigMap is not mounted"
    mount = policy_mounts[0]
    policy_map = config_maps[volumes[mount["name"]]["configMap"]["name"]]
    assert policy_map is not config_map
    mounted_file = PurePosixPath(mount["mountPath"])
    key = mount.get("subPath") or PurePosixPath(policy_path).name
    if not mount.get("subPath"):
        mounted_file = mounted_file / key
    assert str(mounted_file) == policy_path
    assert list(policy_map["data"]) == [key]
    # the shipped policy is a valid one (the gateway refuses to start on an invalid policy)
    shipped = parse_policy(policy_map["data"][key], "deploy/k8s/policy-configmap.yaml:policy.yaml")
    example = yaml.safe_load((ROOT / "policies" / "example.yaml").read_text())
    assert yaml.safe_load(policy_map["data"][key]) == example, (
        "deploy/k8s/policy-configmap.yaml drifted from policies/example.yaml: "
        "run scripts/sync-k8s-policy"
    )
    # an overlay, not a copy of the shipped policy
    assert len(policy_map["data"][key].splitlines()) < 80
    assert shipped is not None

    secret_keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
    assert secret_keys >= {
        "MEMGATE_UPSTREAM_API_KEY",
        "MEMGATE_ADMIN_TOKEN",
        "MEMGATE_REDIS_URL",
    }

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    services = kinds["Service"]
    gateway_services = [s for s in services if s["spec"].get("type") != "ExternalName"]
    assert gateway_services
    for service in gateway_services:
        assert service["spec"]["selector"].items() <= labels.items()
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports or port["targetPort"] in ports.values()
    external = [s for s in services if s["spec"].get("type") == "ExternalName"]
    assert external and external[0]["spec"]["externalName"]
    redis_host = external[0]["metadata"]["name"]
    assert f"@{redis_host}:" in secret["stringData"]["MEMGATE_REDIS_URL"]

    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"]["kind"] == "Deployment"
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert any(m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"])


def test_one_image_name_everywhere() -> None:
    """compose builds the image the Kubernetes Deployment runs, tagged with the version."""
    image = f"memgate:{__version__}"
    assert compose()["services"]["memgate"]["image"] == image
    (deployment,) = by_kind()["Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == image
    assert f"-t {image} ." in (DEPLOY / "Dockerfile").read_text()


# --- safe defaults -------------------------------------------------------------------------


def published_addresses(service: dict[str, Any]) -> list[str]:
    """The host address of each published port (``[address:]host:container``)."""
    out = []
    for port in service.get("ports", []):
        parts = str(port).rsplit(":", 2)
        out.append(parts[0] if len(parts) == 3 else "0.0.0.0")
    return out


def test_compose_publishes_only_on_loopback() -> None:
    services = compose()["services"]
    for name in ("prometheus", "grafana"):
        assert published_addresses(services[name]) == ["127.0.0.1"], name
    # the gateway too, unless the operator sets GATEWAY_ADDRESS
    assert published_addresses(services["memgate"]) == ["${GATEWAY_ADDRESS:-127.0.0.1}"]
    for name, service in services.items():
        if name not in {"memgate", "prometheus", "grafana"}:
            assert not service.get("ports"), name


def test_compose_prometheus_and_grafana_are_locked_down() -> None:
    services = compose()["services"]
    assert not any("lifecycle" in arg for arg in services["prometheus"]["command"])
    grafana = services["grafana"]["environment"]
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert "GF_AUTH_ANONYMOUS_ORG_ROLE" not in grafana
    # the password comes from the environment, with no default to fall back on
    assert re.fullmatch(
        r"\$\{GRAFANA_ADMIN_PASSWORD:\?[^}]+\}", grafana["GF_SECURITY_ADMIN_PASSWORD"]
    )
    assert "admin/admin" not in (DEPLOY / "README.md").read_text()


def test_deploy_readme_says_how_to_put_tls_in_front() -> None:
    text = (DEPLOY / "README.md").read_text()
    assert "## TLS" in text
    for needed in ("proxy_pass http://127.0.0.1:8080", "proxy_buffering off", "ssl_certificate"):
        assert needed in text, needed


# --- Grafana -------------------------------------------------------------------------------


def datasource_uid() -> str:
    (datasource,) = load_yaml(DATASOURCE_FILE)["datasources"]
    return datasource["uid"]


def test_datasource_provisioning() -> None:
    (datasource,) = load_yaml(DATASOURCE_FILE)["datasources"]
    assert datasource["type"] == "prometheus"
    assert datasource["uid"] == "memgate-prometheus"
    assert datasource["url"] == "http://prometheus:9090"
    assert "prometheus" in compose()["services"]


def test_two_dashboards() -> None:
    assert {p.name for p in DASHBOARDS} == {"memgate-overview.json", "memgate-memory.json"}
    uids = [load_dashboard(p)["uid"] for p in DASHBOARDS]
    assert len(set(uids)) == len(uids)


def walk(node: Any) -> Any:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_is_plain_provisionable_json(path: Path) -> None:
    text = path.read_text()
    board = json.loads(text)
    assert "__inputs" not in board and "__requires" not in board
    assert "${DS_" not in text and "__inputs" not in text
    assert board.get("id") is None
    assert 36 <= board["schemaVersion"] <= 41
    assert board["title"] and board["uid"]
    panels = board["panels"]
    assert panels
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    # Every query goes through the dashboard's datasource variable, so the dashboard works in
    # any Grafana (imported by hand, with another Prometheus); it defaults to the provisioned one.
    variables = {v["name"]: v for v in board["templating"]["list"]}
    source = variables["datasource"]
    assert source["type"] == "datasource" and source["query"] == "prometheus"
    assert source["current"]["value"] == datasource_uid()
    uid = "${datasource}"
    for node in walk(board):
        ds = node.get("datasource")
        if isinstance(ds, dict) and ds.get("type") != "grafana":
            assert ds == {"type": "prometheus", "uid": uid}, node.get("title", node)
        else:
            assert ds is None or (isinstance(ds, dict) and ds.get("type") == "grafana"), ds
    assert datasource_uid() not in text.replace(f'"value": "{datasource_uid()}"', "")
    for panel in panels:
        assert panel["type"] in {"timeseries", "stat"}, panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": uid}
        assert panel["targets"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == {"type": "prometheus", "uid": uid}
            assert target["expr"].strip()
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["w"] > 0 and grid["h"] > 0


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_panels_do_not_overlap(path: Path) -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in load_dashboard(path)["panels"]:
        g = panel["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, (panel["title"], cells.get((x, y)))
                cells[(x, y)] = panel["title"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_variables_are_defined(path: Path) -> None:
    board = load_dashboard(path)
    defined = {v["name"] for v in board.get("templating", {}).get("list", [])}
    for panel in board["panels"]:
        for target in panel["targets"]:
            for var in re.findall(r"\$\{?(\w+)", target["expr"]):
                assert var in GRAFANA_BUILTINS or var in defined, (panel["title"], var)


def test_overview_and_memory_dashboards_cover_the_brief() -> None:
    used: dict[str, set[str]] = {}
    for name, _, expr in dashboard_queries():
        used.setdefault(name, set()).update(
            HISTOGRAM_SUFFIX.sub("", n) for n in used_metric_names(expr)
        )
    assert used["memgate-overview.json"] >= {
        "memgate_requests_total",
        "memgate_request_duration_seconds",
        "memgate_upstream_duration_seconds",
        "memgate_overhead_duration_seconds",
        "memgate_time_to_first_byte_seconds",
        "memgate_prompt_tokens_total",
        "memgate_completion_tokens_total",
        "memgate_injected_tokens_total",
        "memgate_upstream_errors_total",
    }
    assert used["memgate-memory.json"] >= {
        "memgate_memories_injected",
        "memgate_recall_dropped_total",
        "memgate_conflicts_total",
        "memgate_corrections_total",
        "memgate_pending_candidates",
        "memgate_candidate_decisions_total",
        "memgate_memories",
    }
    for _, _, expr in dashboard_queries():
        if "histogram_quantile" in expr:
            assert "[$__rate_interval]" in expr and "sum by (le" in expr, expr


# --- alert rules ---------------------------------------------------------------------------


def test_alert_rules_are_complete() -> None:
    rules = alert_rules()
    assert len(rules) >= 4
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names))
    for rule in rules:
        assert rule["expr"].strip(), rule["alert"]
        assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
    exprs = " ".join(r["expr"] for r in rules)
    by_name = {r["alert"]: r["expr"] for r in rules}
    # a target is found without a job label (Kubernetes annotation scraping names jobs its
    # own way), and a target that vanished altogether is caught too
    assert "job=" not in exprs
    assert "absent(memgate_build_info)" in by_name["MemgateAbsent"]
    # upstream failure alerts leave out the client's own 4xx, which has an alert of its own
    for name in ("MemgateUpstreamErrorRateHigh", "MemgateUpstreamErrorRateCritical"):
        assert 'kind!="http_4xx"' in by_name[name], name
    assert 'code=~"4.."' in by_name["MemgateClientErrorRateHigh"]
    for metric in (
        "memgate_upstream_errors_total",
        "memgate_backend_errors_total",
        "memgate_overhead_duration_seconds_bucket",
        "memgate_pending_candidates",
    ):
        assert metric in exprs, metric


# --- every metric the dashboards and alerts use exists -------------------------------------


def test_every_used_metric_is_exposed() -> None:
    exposed = exposed_metric_names()
    queries = [(f"{name}: {title}", expr) for name, title, expr in dashboard_queries()]
    queries += [(f"alerts.yml: {r['alert']}", r["expr"]) for r in alert_rules()]
    assert queries
    for where, expr in queries:
        for name in used_metric_names(expr):
            base = HISTOGRAM_SUFFIX.sub("", name)
            if base != name:
                assert exposed.get(base) == "histogram", f"{where}: {name} is not a histogram"
            else:
                assert name in exposed, f"{where}: {name} is not exposed by Metrics"
