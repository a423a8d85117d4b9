"""Offline checks of deploy/ files that no packaged validator covers, run by deploy/tests/run.sh
with the tools environment's Python (.venv-tools: polyaxon, kubernetes-validate, PyYAML).

Subcommands (each exits 1 with a message naming the problem):
  connection FILE            Polyaxon agent connection entries, through Polyaxon's own schemas
  pod-from-operation FILE    print a rendered operation's container (its inline component) as a
                             Kubernetes Pod (Polyaxon's globals substituted), for
                             kubernetes-validate --strict
  device-plugin FILE         NVIDIA device-plugin configs embedded in a ConfigMap, against the
                             plugin's config API v1 (transcribed below)
  mig-parted FILE            MIG manager layouts embedded in a ConfigMap, against NVIDIA's MIG
                             profile table (below)
  job FILE...                the rendered cohort Jobs' invariants that the schema does not express (enum
                             values, podFailurePolicy's need for restartPolicy Never, the barrier
                             mount, one GPU unit, completions = parallelism, no retries)
"""

import re
import sys

import yaml

# NVIDIA MIG profiles: GPU -> profile -> (compute slices of 7, memory slices of 8, max instances).
# Source: NVIDIA MIG User Guide, "Supported MIG Profiles" (A100 table with the 80GB names stated
# beside it; H100 and H200 tables), matching the GPU Operator's default mig-parted config.
_HOPPER_AMPERE_SHAPES = [  # (compute, memory slices, max instances), in profile order
    (1, 1, 7), (1, 2, 4), (2, 2, 3), (3, 4, 2), (4, 4, 1), (7, 8, 1),
]
MIG_PROFILES = {
    gpu: dict(zip(names, _HOPPER_AMPERE_SHAPES))
    for gpu, names in {
        "a100-40gb": ["1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
        "a100-80gb": ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
        "h100-80gb": ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
        "h200-141gb": ["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
    }.items()
}
ALL_PROFILES = {p for table in MIG_PROFILES.values() for p in table}

# NVIDIA k8s-device-plugin config API v1 (api/config/v1: Config, Flags, Sharing,
# ReplicatedResources, ReplicatedResource); only the fields coload's configs may use.
CONFIG_KEYS = {"version", "flags", "resources", "sharing", "imex"}
FLAG_KEYS = {"migStrategy", "failOnInitError", "mpsRoot", "nvidiaDriverRoot", "nvidiaDevRoot",
             "gdsEnabled", "mofedEnabled", "useNodeFeatureAPI", "deviceDiscoveryStrategy",
             "plugin", "gfd"}
MIG_STRATEGIES = {"none", "single", "mixed"}
SHARING_KEYS = {"timeSlicing", "mps"}
REPLICATED_KEYS = {"renameByDefault", "failRequestsGreaterThanOne", "resources"}
RESOURCE_KEYS = {"name", "rename", "devices", "replicas"}
# The plugin's MIG resource names: "mig-" + the GPU-instance profile with `+` written as `.`
# (internal/rm/rm.go), e.g. nvidia.com/mig-1g.10gb.me for 1g.10gb+me.
RESOURCE_NAME = re.compile(r"^nvidia\.com/(gpu|mig-([1-8]g\.[0-9]+gb)(\.me\.all|\.me|\.gfx|-me)?)$")
# A layout whose name holds this puts MIG devices on GPU 0 alone (the cluster backend trusts it:
# crates/cluster/src/mig_node.rs, SINGLE_GPU_LAYOUT).
SINGLE_GPU_LAYOUT = "-gpu0-"


class CheckError(Exception):
    pass


def fail(msg):
    raise CheckError(msg)


def load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def unknown(keys, allowed, where):
    extra = set(keys) - allowed
    if extra:
        fail(f"{where}: unknown field(s) {sorted(extra)} (allowed: {sorted(allowed)})")


def check_connection(path):
    from polyaxon._connections import V1ClaimConnection, V1Connection

    doc = load(path)
    conns = doc.get("connections") if isinstance(doc, dict) else None
    if not conns:
        fail(f"{path}: no `connections` list")
    for c in conns:
        conn = V1Connection.from_dict(c)
        if conn.kind != "volume_claim":
            fail(f"{path}: connection {conn.name} has kind {conn.kind}, expected volume_claim")
        schema = V1ClaimConnection.from_dict(c.get("schema") or {})
        if conn.name == "gpu-benchmark-sync" and schema.mount_path != "/mnt/benchmark-sync":
            fail(f"{path}: gpu-benchmark-sync must mount at /mnt/benchmark-sync, not {schema.mount_path}")
    if "gpu-benchmark-sync" not in {c.get("name") for c in conns}:
        fail(f"{path}: no connection named gpu-benchmark-sync")


def pod_from_operation(path):
    op = load(path)
    if op.get("kind") != "operation" or not isinstance(op.get("component"), dict):
        fail(f"{path}: not an operation with an inline component")
    comp = op["component"]
    params = {}
    globals_ = {"run_outputs_path": "/plx-context/artifacts/run/outputs",
                "uuid": "8aac02e3a62a4f0aaa257c59da5eab80"}

    def render(v):
        if isinstance(v, str):
            def sub(m):
                key = m.group(1)
                if key.startswith("globals."):
                    return str(globals_[key[len("globals."):]])
                return str(params[key])
            return re.sub(r"\{\{\s*([A-Za-z0-9_.]+)\s*\}\}", sub, v)
        if isinstance(v, list):
            return [render(x) for x in v]
        if isinstance(v, dict):
            return {k: render(x) for k, x in v.items()}
        return v

    run = render(comp["run"])
    container = dict(run["container"])
    container.setdefault("name", "polyaxon-main")
    env = run.get("environment", {})
    spec = {"containers": [container]}
    if "nodeSelector" in env:
        spec["nodeSelector"] = env["nodeSelector"]
    if "restartPolicy" in env:
        spec["restartPolicy"] = env["restartPolicy"]
    # The connection becomes a PVC volume mounted at its mountPath (as the agent does it).
    spec["volumes"] = [{"name": "gpu-benchmark-sync",
                        "persistentVolumeClaim": {"claimName": "gpu-benchmark-sync"}}]
    container.setdefault("volumeMounts", []).append(
        {"name": "gpu-benchmark-sync", "mountPath": "/mnt/benchmark-sync"})
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "coload-component-sample"},
           "spec": spec}
    yaml.safe_dump(pod, sys.stdout, sort_keys=False)


def check_replicated(r, where, mig_strategy):
    if not isinstance(r, dict):
        fail(f"{where}: must be a mapping")
    unknown(r, REPLICATED_KEYS, where)
    for k in ("renameByDefault", "failRequestsGreaterThanOne"):
        if k in r and not isinstance(r[k], bool):
            fail(f"{where}.{k}: must be true or false, got {r[k]!r}")
    if r.get("failRequestsGreaterThanOne") is not True:
        fail(f"{where}: set failRequestsGreaterThanOne: true (a request for 2 shared units is 2 turns on one GPU)")
    resources = r.get("resources")
    if not resources:
        fail(f"{where}.resources: at least one resource is needed")
    for i, res in enumerate(resources):
        w = f"{where}.resources[{i}]"
        unknown(res, RESOURCE_KEYS, w)
        name = res.get("name", "")
        m = RESOURCE_NAME.match(name)
        if not m:
            fail(f"{w}.name: {name!r} is not nvidia.com/gpu or nvidia.com/mig-<profile>")
        if m.group(2):
            if m.group(2) not in ALL_PROFILES:
                fail(f"{w}.name: MIG profile {m.group(2)} exists on none of {sorted(MIG_PROFILES)}")
            if mig_strategy != "mixed":
                fail(f"{w}.name: {name} is only advertised with migStrategy: mixed")
        reps = res.get("replicas")
        if not isinstance(reps, int) or isinstance(reps, bool) or reps < 2:
            fail(f"{w}.replicas: must be an integer >= 2 to share, got {reps!r}")


def check_device_plugin(path):
    cm = load(path)
    if cm.get("kind") != "ConfigMap" or not cm.get("data"):
        fail(f"{path}: expected a ConfigMap with data")
    for key, text in cm["data"].items():
        where = f"{path}:{key}"
        cfg = yaml.safe_load(text)
        if not isinstance(cfg, dict):
            fail(f"{where}: not a mapping")
        unknown(cfg, CONFIG_KEYS, where)
        if cfg.get("version") != "v1":
            fail(f"{where}: version must be v1, got {cfg.get('version')!r}")
        flags = cfg.get("flags") or {}
        unknown(flags, FLAG_KEYS, f"{where}.flags")
        strategy = flags.get("migStrategy", "none")
        if strategy not in MIG_STRATEGIES:
            fail(f"{where}.flags.migStrategy: {strategy!r} is not one of {sorted(MIG_STRATEGIES)}")
        sharing = cfg.get("sharing") or {}
        unknown(sharing, SHARING_KEYS, f"{where}.sharing")
        if "timeSlicing" in sharing and "mps" in sharing:
            fail(f"{where}.sharing: time-slicing and MPS are exclusive; pick one")
        if "timeSlicing" in sharing:
            check_replicated(sharing["timeSlicing"], f"{where}.sharing.timeSlicing", strategy)
        if "mps" in sharing:
            check_replicated(sharing["mps"], f"{where}.sharing.mps", strategy)
            if strategy != "none" or any(r["name"] != "nvidia.com/gpu" for r in sharing["mps"]["resources"]):
                fail(f"{where}.sharing.mps: MPS shares full GPUs only (nvidia.com/gpu, migStrategy none)")


def check_mig_parted(path):
    cm = load(path)
    data = cm.get("data") or {}
    if "config.yaml" not in data:
        fail(f"{path}: expected data.config.yaml")
    spec = yaml.safe_load(data["config.yaml"])
    unknown(spec, {"version", "mig-configs"}, path)
    if spec.get("version") != "v1":
        fail(f"{path}: version must be v1")
    configs = spec.get("mig-configs") or {}
    if not configs:
        fail(f"{path}: no mig-configs")
    for name, entries in configs.items():
        where = f"{path}:{name}"
        if not isinstance(entries, list) or not entries:
            fail(f"{where}: must be a non-empty list")
        for e in entries:
            unknown(e, {"device-filter", "devices", "mig-enabled", "mig-devices"}, where)
            if not isinstance(e.get("mig-enabled"), bool):
                fail(f"{where}: mig-enabled must be true or false")
            if e.get("devices") != "all" and not isinstance(e.get("devices"), list):
                fail(f"{where}: devices must be 'all' or a list of indexes")
            devices = e.get("mig-devices") or {}
            if not e["mig-enabled"]:
                if devices:
                    fail(f"{where}: mig-devices given with mig-enabled: false")
                continue
            gpu = next((g for g in MIG_PROFILES if name.startswith(g + "-")), None)
            if gpu is None:
                fail(f"{where}: a MIG layout's name must start with its GPU, one of {sorted(MIG_PROFILES)}")
            table = MIG_PROFILES[gpu]
            compute = memory = 0
            for profile, n in devices.items():
                if profile not in table:
                    fail(f"{where}: {gpu} has no MIG profile {profile} (it has {', '.join(table)})")
                c, m, most = table[profile]
                if not isinstance(n, int) or n < 1 or n > most:
                    fail(f"{where}: {profile} x{n} on {gpu}: at most {most} instances")
                compute += c * n
                memory += m * n
            if compute > 7 or memory > 8:
                fail(f"{where}: needs {compute}/7 compute and {memory}/8 memory slices of {gpu}")
        if SINGLE_GPU_LAYOUT in name:
            enabled = [e for e in entries if e.get("mig-enabled")]
            if len(enabled) != 1 or enabled[0].get("devices") != [0]:
                fail(f"{where}: a `{SINGLE_GPU_LAYOUT}` layout must enable MIG on GPU 0 alone "
                     f"(one mig-enabled entry with devices: [0])")
            for e in entries:
                if not e.get("mig-enabled") and (e.get("devices") == "all" or 0 in e.get("devices", [])):
                    fail(f"{where}: a `{SINGLE_GPU_LAYOUT}` layout must not disable MIG on GPU 0")


def restricted_violations(pod):
    """What a Pod spec breaks of the `restricted` Pod Security Standard (the checks of
    k8s.io/pod-security-admission that apply to coload's Pods), in the API server's words; empty
    when it meets it. The stand-in kubectl's admission uses this too."""
    out = []
    psc = pod.get("securityContext") or {}
    containers = pod.get("containers", []) + pod.get("initContainers", [])
    csc = {c["name"]: c.get("securityContext") or {} for c in containers}
    bad = [n for n, sc in csc.items() if sc.get("allowPrivilegeEscalation") is not False]
    if bad:
        out.append(f'allowPrivilegeEscalation != false (container "{bad[0]}" must set '
                   'securityContext.allowPrivilegeEscalation=false)')
    bad = [n for n, sc in csc.items() if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or [])]
    if bad:
        out.append(f'unrestricted capabilities (container "{bad[0]}" must set '
                   'securityContext.capabilities.drop=["ALL"])')
    if psc.get("runAsNonRoot") is not True and any(sc.get("runAsNonRoot") is not True for sc in csc.values()):
        out.append('runAsNonRoot != true (pod or containers must set securityContext.runAsNonRoot=true)')
    if psc.get("runAsUser") == 0 or any(sc.get("runAsUser") == 0 for sc in csc.values()):
        out.append('runAsUser=0 (pod and containers must not set runAsUser=0)')
    kinds = ("RuntimeDefault", "Localhost")
    if (psc.get("seccompProfile") or {}).get("type") not in kinds and any(
            (sc.get("seccompProfile") or {}).get("type") not in kinds for sc in csc.values()):
        out.append('seccompProfile (pod or containers must set securityContext.seccompProfile.type '
                   'to "RuntimeDefault" or "Localhost")')
    return out


def check_job(path):
    job = load(path)
    spec = job.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    if job.get("kind") != "Job":
        fail(f"{path}: not a Job")
    if spec.get("completionMode") != "Indexed":
        fail(f"{path}: completionMode must be Indexed (the index is the replica id)")
    if spec.get("completions") != spec.get("parallelism") or not isinstance(spec.get("completions"), int):
        fail(f"{path}: completions and parallelism must be equal (the whole cohort runs at once)")
    if spec.get("backoffLimit") != 0:
        fail(f"{path}: backoffLimit must be 0 (a retried replica cannot rejoin its cohort)")
    if pod.get("restartPolicy") != "Never":
        fail(f"{path}: restartPolicy must be Never (podFailurePolicy requires it)")
    rules = (spec.get("podFailurePolicy") or {}).get("rules") or []
    if not rules or any(r.get("action") not in ("FailJob", "Ignore", "Count", "FailIndex") for r in rules):
        fail(f"{path}: podFailurePolicy needs rules with a valid action")
    if not any(r.get("action") == "FailJob" and (r.get("onExitCodes") or {}).get("operator") == "NotIn"
               and (r.get("onExitCodes") or {}).get("values") == [0] for r in rules):
        fail(f"{path}: podFailurePolicy must fail the Job on any non-zero worker exit (NotIn [0])")
    for r in rules:
        codes = r.get("onExitCodes")
        if codes and codes.get("operator") not in ("In", "NotIn"):
            fail(f"{path}: onExitCodes.operator must be In or NotIn, got {codes.get('operator')!r}")
    if "kubernetes.io/hostname" not in (pod.get("nodeSelector") or {}):
        fail(f"{path}: nodeSelector must pin kubernetes.io/hostname")
    (c,) = [c for c in pod["containers"] if c["name"] == "worker"]
    if not any(m.get("mountPath") == "/mnt/benchmark-sync" for m in c.get("volumeMounts", [])):
        fail(f"{path}: the worker must mount the shared claim at /mnt/benchmark-sync")
    for kind in ("requests", "limits"):
        res = c.get("resources", {}).get(kind, {})
        gpus = [k for k in res if k.startswith("nvidia.com/")]
        if len(gpus) != 1 or res[gpus[0]] != 1:
            fail(f"{path}: {kind} must hold exactly one GPU unit, got {gpus}")
        if str(res.get("cpu")) != "2" or res.get("memory") != "4Gi":
            fail(f"{path}: {kind} must be cpu 2 and memory 4Gi")
    for v in restricted_violations(pod):
        fail(f"{path}: the Pods must meet the restricted Pod Security Standard: {v}")
    if not isinstance(spec.get("ttlSecondsAfterFinished"), int):
        fail(f"{path}: ttlSecondsAfterFinished must be set (finished Jobs are cleaned up)")


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = argv[1], argv[2:]
    try:
        if cmd == "connection":
            check_connection(args[0])
        elif cmd == "pod-from-operation":
            pod_from_operation(args[0])
        elif cmd == "device-plugin":
            check_device_plugin(args[0])
        elif cmd == "mig-parted":
            check_mig_parted(args[0])
        elif cmd == "job":
            for a in args:
                check_job(a)
        else:
            print(f"unknown subcommand {cmd}", file=sys.stderr)
            return 2
    except CheckError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a schema library's validation error
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
