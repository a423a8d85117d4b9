#!/usr/bin/env bash
# Offline tests of deploy/: every YAML through its validator (and a deliberately broken copy of
# each through the same validator, which must fail), the launch and collect scripts against
# recording stubs of `polyaxon` and `kubectl`, and shellcheck. Needs the validators installed by
# scripts/provision-tools.sh (.venv-tools); no cluster, no Polyaxon server, no network.
# Ends with "N passed, M failed" and exits non-zero on any failure.
set -euo pipefail

usage() {
  echo "usage: deploy/tests/run.sh   (after scripts/provision-tools.sh; set COLOAD_TOOLS_VENV to use another venv)"
}
if [[ $# -gt 0 ]]; then
  case "$1" in
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
deploy="$root/deploy"
venv=${COLOAD_TOOLS_VENV:-$root/.venv-tools}
bin="$venv/bin"
for tool in python polyaxon kubernetes-validate shellcheck hadolint; do
  [[ -x "$bin/$tool" ]] || { echo "error: $bin/$tool is missing; run scripts/provision-tools.sh first" >&2; exit 1; }
done
py="$bin/python"
check="$deploy/tests/check.py"
# Kubernetes versions to validate against: 1.31 (podFailurePolicy is GA from 1.31) and the newest
# schema kubernetes-validate ships.
k8s_versions=(1.31.0 1.37.0)
# Polyaxon must not try to reach a server or write into the user's home during checks.
export POLYAXON_NO_OP=true
work=$(mktemp -d)
export HOME="$work/home"
mkdir -p "$HOME"
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok    $1"; }
bad() {
  failed=$((failed + 1))
  echo "FAIL  $1"
  [[ -z "${2:-}" ]] || printf '%s\n' "$2" | tail -n 15 | sed 's/^/      /'
}
# expect_pass NAME CMD...: CMD must exit 0.
expect_pass() {
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then ok "$name"; else bad "$name" "$out"; fi
}
# expect_fail NAME CMD...: CMD must exit non-zero (a broken file must be rejected).
expect_fail() {
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then bad "$name (was accepted)" "$out"; else ok "$name"; fi
}
# break_copy SRC NAME SED-EXPR: a broken copy of SRC under $work/broken-NAME/, same file name.
break_copy() {
  local src=$1 name=$2 expr=$3 dir="$work/broken-$2"
  mkdir -p "$dir"
  sed -e "$expr" "$src" >"$dir/$(basename "$src")"
  if cmp -s "$src" "$dir/$(basename "$src")"; then
    echo "test setup error: '$expr' did not change $src" >&2
    exit 1
  fi
  printf '%s\n' "$dir/$(basename "$src")"
}
kval() { "$bin/kubernetes-validate" --strict --quiet -k "$1" "${@:2}"; }

component="$deploy/polyaxon/polyaxonfile.yaml"
operation="$deploy/polyaxon/cohort-operation.yaml"
connection="$deploy/polyaxon/agent-connection.yaml"
sample=(-P experiment=sample-0001 -P node_name=gpu-node-1 -P replica=0 -P count=7)

echo "== Polyaxon (polyaxon check, CLI $("$py" -c 'import polyaxon.pkg as p; print(p.VERSION)'))"
for mode in exclusive mig timeslice mig-timeslice mps; do
  expect_pass "component valid with sample params, mode=$mode" \
    "$bin/polyaxon" check -f "$component" "${sample[@]}" -P mode="$mode" -P workload=train
done
expect_pass "component valid for an infer worker with window and warmup overrides" \
  "$bin/polyaxon" check -f "$component" "${sample[@]}" -P mode=timeslice -P workload=infer -P window_s=30 -P warmup_batches=5
expect_pass "component valid for an mps worker declaring the device plugin's share (issue 12)" \
  "$bin/polyaxon" check -f "$component" "${sample[@]}" -P mode=mps -P workload=train -P "mps_share=--mps-replicas 7"
expect_fail "component rejects an mps_share that is not a share flag" \
  "$bin/polyaxon" check -f "$component" "${sample[@]}" -P mode=mps -P workload=train -P "mps_share=--mps-replicas 7; rm -rf /"
expect_pass "component lint (no params)" "$bin/polyaxon" check -f "$component" -l
expect_pass "mapping-matrix operation valid (pathRef resolved)" \
  "$bin/polyaxon" check -f "$operation" -P experiment=sample-0001 -P node_name=gpu-node-1 -P mode=timeslice
expect_fail "component rejects an unknown mode" \
  "$bin/polyaxon" check -f "$component" "${sample[@]}" -P mode=timeshare -P workload=train
expect_fail "component rejects an unknown workload" \
  "$bin/polyaxon" check -f "$component" "${sample[@]}" -P mode=mig -P workload=training
expect_fail "component rejects a bad experiment id" \
  "$bin/polyaxon" check -f "$component" -P experiment='a/b' -P node_name=n -P replica=0 -P count=1 -P mode=mig -P workload=train
expect_fail "component requires node_name" \
  "$bin/polyaxon" check -f "$component" -P experiment=x -P replica=0 -P count=1 -P mode=mig -P workload=train
f=$(break_copy "$component" run-kind 's/^  kind: job$/  kind: jobb/')
expect_fail "broken component (run.kind jobb) fails polyaxon check" "$bin/polyaxon" check -f "$f" "${sample[@]}" -P mode=mig -P workload=train
f=$(break_copy "$component" container-field 's/^    args:$/    argz:/')
expect_fail "broken component (container field argz) fails polyaxon check" "$bin/polyaxon" check -f "$f" "${sample[@]}" -P mode=mig -P workload=train
f=$(break_copy "$component" env-field 's/^    nodeSelector:$/    nodeSelektor:/')
expect_fail "broken component (environment.nodeSelektor) fails polyaxon check" "$bin/polyaxon" check -f "$f" "${sample[@]}" -P mode=mig -P workload=train
f=$(break_copy "$operation" matrix-kind 's/kind: mapping/kind: mappin/')
cp "$component" "$(dirname "$f")/"
expect_fail "broken operation (matrix kind mappin) fails polyaxon check" "$bin/polyaxon" check -f "$f"

# The component's container and environment, rendered as a Pod, through the Kubernetes schemas:
# polyaxon check does not look inside the container's env and resources.
"$py" "$check" pod-from-component "$component" >"$work/component-pod.yaml"
for v in "${k8s_versions[@]}"; do
  expect_pass "component container as a Pod validates (kubernetes $v, strict)" kval "$v" "$work/component-pod.yaml"
done
f=$(break_copy "$component" container-env 's/^      - name: NODE_NAME$/      - nam: NODE_NAME/')
"$py" "$check" pod-from-component "$f" >"$work/component-pod-broken.yaml"
expect_fail "broken component (env entry without name) fails as a Pod" kval 1.31.0 "$work/component-pod-broken.yaml"

expect_pass "agent connection valid (Polyaxon V1Connection + V1ClaimConnection)" "$py" "$check" connection "$connection"
f=$(break_copy "$connection" conn-mount 's/mountPath:/mountpath:/')
expect_fail "broken connection (mountpath) fails the connection schema" "$py" "$check" connection "$f"
f=$(break_copy "$connection" conn-kind 's/kind: volume_claim/kind: volume_clam/')
expect_fail "broken connection (kind volume_clam) fails the connection schema" "$py" "$check" connection "$f"

echo "== Kubernetes (kubernetes-validate --strict)"
manifests=("$deploy"/k8s/*.yaml "$deploy"/k8s/device-plugin/*.yaml)
for m in "${manifests[@]}"; do
  for v in "${k8s_versions[@]}"; do
    expect_pass "${m#"$deploy"/} validates (kubernetes $v)" kval "$v" "$m"
  done
  f=$(break_copy "$m" "strict-$(basename "$m")" '0,/^metadata:$/s//bogusTopLevelField: true\nmetadata:/')
  expect_fail "broken ${m#"$deploy"/} (unknown top-level field) fails validation" kval 1.31.0 "$f"
done
f=$(break_copy "$deploy/k8s/cohort-job.yaml" job-type 's/^  backoffLimit: 0$/  backoffLimit: "zero"/')
expect_fail "broken cohort-job.yaml (backoffLimit not an integer) fails validation" kval 1.31.0 "$f"
f=$(break_copy "$deploy/k8s/cohort-job.yaml" job-status 's/^            status: "True"$/            status: null/')
expect_fail "broken cohort-job.yaml (onPodConditions without status) fails validation" kval 1.31.0 "$f"

jobs=("$deploy"/k8s/cohort-job*.yaml)
expect_pass "cohort Job invariants hold in every variant" "$py" "$check" job "${jobs[@]}"
for e in 's/^      restartPolicy: Never$/      restartPolicy: OnFailure/' \
  's/^  completionMode: Indexed$/  completionMode: NonIndexed/' \
  's/^  parallelism: 7  # coload:count$/  parallelism: 1  # coload:count/' \
  's/operator: NotIn/operator: Maybe/' \
  's/^  backoffLimit: 0$/  backoffLimit: 3/' \
  's|mountPath: /mnt/benchmark-sync|mountPath: /mnt/sync|'; do
  f=$(break_copy "$deploy/k8s/cohort-job.yaml" "job-inv-$passed" "$e")
  expect_fail "broken cohort-job.yaml ($e) fails the Job invariants" "$py" "$check" job "$f"
done
# The Job's shell wrapper, run for real with bench-worker replaced by echo: index -> workload.
wrapper_out=$("$py" - "$deploy/k8s/cohort-job.yaml" <<'PY' 2>&1 || true
import subprocess, sys, yaml
c = yaml.safe_load(open(sys.argv[1]))["spec"]["template"]["spec"]["containers"][0]
script = c["args"][0].replace("exec bench-worker", "exec echo bench-worker")
env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
for idx in ("0", "1", "6", "7"):
    r = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True,
                       env={**env, "JOB_COMPLETION_INDEX": idx, "PATH": "/usr/bin:/bin"})
    print(idx, r.returncode, " ".join((r.stdout + r.stderr).split()))
r = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True,
                   env={**env, "JOB_COMPLETION_INDEX": "2", "MODE": "mps",
                        "MPS_SHARE": "--mps-replicas 7", "PATH": "/usr/bin:/bin"})
print("mps", r.returncode, " ".join((r.stdout + r.stderr).split()))
PY
)
if grep -q '^0 0 bench-worker --experiment example --replica 0 --count 7 --workload infer --mode timeslice .*--out /mnt/benchmark-sync/coload-results/example/worker-0 ' <<<"$wrapper_out" \
  && grep -q '^1 0 .*--replica 1 .*--workload train ' <<<"$wrapper_out" \
  && grep -q '^6 0 .*--replica 6 .*--workload train .*worker-6 ' <<<"$wrapper_out" \
  && grep -q '^7 2 error: ' <<<"$wrapper_out" \
  && grep -q '^mps 0 bench-worker .*--mode mps .*--log-format json --mps-replicas 7$' <<<"$wrapper_out" \
  && ! grep -q '^0 0 .*--mps' <<<"$wrapper_out"; then
  ok "Job wrapper: index i runs replica i with the i-th workload, an index past COUNT exits 2, MPS_SHARE is appended"
else bad "Job wrapper: index i runs replica i with the i-th workload" "$wrapper_out"; fi
expect_pass "Job variants differ from cohort-job.yaml only in the GPU resource key" \
  "$py" "$check" variants "$deploy/k8s/cohort-job.yaml" "$deploy/k8s/cohort-job.gpu-shared.yaml" "$deploy/k8s/cohort-job.mig-1g.10gb.yaml"
f=$(break_copy "$deploy/k8s/cohort-job.gpu-shared.yaml" variant-drift 's/^              memory: 4Gi$/              memory: 8Gi/')
expect_fail "a drifted variant (memory 8Gi) fails the variant check" "$py" "$check" variants "$deploy/k8s/cohort-job.yaml" "$f"

dp="$deploy/k8s/device-plugin/device-plugin-config.yaml"
mp="$deploy/k8s/device-plugin/mig-parted-config.yaml"
expect_pass "device-plugin configs follow the plugin's config API v1" "$py" "$check" device-plugin "$dp"
expect_pass "MIG layouts use NVIDIA's profiles for their GPU and fit it" "$py" "$check" mig-parted "$mp"
for e in 's/failRequestsGreaterThanOne: true/failRequestsGreaterThanOne: false/' \
  's/replicas: 7/replicas: seven/' \
  's/migStrategy: single/migStrategy: singel/' \
  's/      timeSlicing:/      timeslicing:/' \
  's|nvidia.com/mig-2g.35gb|nvidia.com/mig-2g.30gb|'; do
  f=$(break_copy "$dp" "dp-$passed" "$e")
  expect_fail "broken device-plugin config ($e) is rejected" "$py" "$check" device-plugin "$f"
done
for e in 's/"1g.18gb": 7/"1g.10gb": 11/' \
  's/"1g.5gb": 7/"1g.5gb": 8/' \
  's/"2g.20gb": 1/"2g.20gb": 2/' \
  's/^      h100-80gb-all-1g.10gb:/      all-1g.10gb:/'; do
  f=$(break_copy "$mp" "mp-$passed" "$e")
  expect_fail "broken MIG layout ($e) is rejected" "$py" "$check" mig-parted "$f"
done

echo "== bench-worker flags"
# Every --flag that the deploy files pass must be one bench-worker accepts: its own flags, and
# the protocol flags it shares with bench-cohort (crates/cohort-schema/src/cli.rs, issue 11).
cli="$root/bins/bench-worker/src/cli.rs"
shared_cli="$root/crates/cohort-schema/src/cli.rs"
if [[ -f "$cli" && -f "$shared_cli" ]]; then
  known=$(sed -n 's/^ *pub\((crate)\)\{0,1\} \([a-z_]*\):.*/\2/p' "$cli" "$shared_cli" | tr '_' '-' | sort -u)
  known_from="bins/bench-worker/src/cli.rs and crates/cohort-schema/src/cli.rs"
else
  known=$(printf '%s\n' experiment replica count workload mode sync-dir out node-name window-s \
    warmup-batches start-lead-s join-timeout-s device batch-size image-size seed log-format quiet | sort)
  known_from="the bench-worker issue's flag list"
fi
used=$(grep -ho -- '--[a-z][a-z-]*' "$component" "$deploy/k8s/cohort-job.yaml" "$deploy/lib/cohort-args.sh" \
  | grep -v -- '--[a-z-]*-$' | sed 's/^--//' | sort -u)
unknown_flags=$(comm -23 <(printf '%s\n' "$used") <(printf '%s\n' "$known"))
if [[ -z "$unknown_flags" ]]; then
  ok "every bench-worker flag used in deploy/ exists ($known_from)"
else
  bad "every bench-worker flag used in deploy/ exists ($known_from)" "unknown: $unknown_flags"
fi

echo "== shellcheck"
scripts=("$deploy"/polyaxon/*.sh "$deploy"/k8s/*.sh "$deploy"/lib/*.sh "$deploy"/tests/run.sh "$deploy"/tests/stubs/* "$root/scripts/provision-tools.sh")
expect_pass "shellcheck clean: ${#scripts[@]} scripts" "$bin/shellcheck" -x "${scripts[@]}"

echo "== container image (hadolint; the image itself is not built here: no Docker engine)"
dockerfile="$deploy/docker/Dockerfile"
# DL3008 (pin apt package versions) is ignored: Debian's point releases remove old versions, so
# pins break rebuilds; the base images are pinned by tag instead.
expect_pass "Dockerfile passes hadolint" "$bin/hadolint" --no-color --ignore DL3008 "$dockerfile"
f=$(break_copy "$dockerfile" dockerfile-parse 's/^FROM debian:bookworm-slim AS runtime$/FORM debian:bookworm-slim AS runtime/')
expect_fail "broken Dockerfile (FORM) fails hadolint" "$bin/hadolint" --no-color --ignore DL3008 "$f"
f=$(break_copy "$dockerfile" dockerfile-root 's/^USER 10001:10001$/USER root/')
expect_fail "broken Dockerfile (USER root) fails hadolint" "$bin/hadolint" --no-color --ignore DL3008 "$f"
problems=""
grep -q '^ARG TORCH_VERSION=2\.11\.0$' "$dockerfile" || problems+="torch 2.11.0 not pinned; "
grep -q 'LIBTORCH_USE_PYTORCH=1' "$dockerfile" || problems+="builder does not set LIBTORCH_USE_PYTORCH=1; "
grep -q '^ENV LD_LIBRARY_PATH=' "$dockerfile" || problems+="runtime does not set LD_LIBRARY_PATH; "
[[ "$(grep '^USER ' "$dockerfile" | tail -1)" == "USER 10001:10001" ]] || problems+="last USER is not the non-root 10001; "
grep -q '^RUN bench-worker --help' "$dockerfile" || problems+="no bench-worker --help smoke; "
[[ $(grep -c '^FROM ' "$dockerfile") -eq 2 ]] || problems+="expected a builder and a runtime stage; "
if [[ -z "$problems" ]]; then ok "Dockerfile: two stages, torch 2.11.0, LD_LIBRARY_PATH, non-root user, --help smoke"
else bad "Dockerfile: two stages, torch 2.11.0, LD_LIBRARY_PATH, non-root user, --help smoke" "$problems"; fi

echo "== launch-cohort.sh (recording polyaxon stub)"
launch="$deploy/polyaxon/launch-cohort.sh"
stubs="$deploy/tests/stubs"
# run_launch LOG ARGS...: runs launch-cohort.sh with the stub first on PATH; output in LOG.out.
run_launch() {
  local log=$1
  shift
  rm -f "$log" "$log".*
  : >"$log"
  STUB_LOG="$log" PATH="$stubs:$PATH" "$launch" "$@" >"$log.out" 2>&1
}
# runs_field LOG NAME: the NAME=value params of each recorded `run`, one line per run.
runs_field() {
  awk -v name="$2" 'BEGIN { RS = ""; FS = "\n" } $1 == "run" {
    for (i = 1; i < NF; i++) if ($i == "-P" && index($(i + 1), name "=") == 1) print substr($(i + 1), length(name) + 2)
  }' "$1"
}
runs_count() { awk 'BEGIN { RS = ""; FS = "\n" } $1 == "run" { n++ } END { print n + 0 }' "$1"; }
runs_flag() { # LOG FLAG: the value after FLAG in each run
  awk -v flag="$2" 'BEGIN { RS = ""; FS = "\n" } $1 == "run" {
    for (i = 1; i < NF; i++) if ($i == flag) print $(i + 1)
  }' "$1"
}
# assert_cohort NAME LOG COUNT WORKLOADS...: COUNT runs, replicas 0..COUNT-1 once each, one
# experiment id, count=COUNT in every run, workload of replica i = WORKLOADS[i].
assert_cohort() {
  local name=$1 log=$2 n=$3 problems=""
  shift 3
  local want_workloads=("$@")
  [[ $(runs_count "$log") -eq $n ]] || problems+="expected $n runs, got $(runs_count "$log"); "
  [[ "$(runs_field "$log" replica | sort -n | tr '\n' ' ')" == "$(seq 0 $((n - 1)) | tr '\n' ' ')" ]] \
    || problems+="replicas are '$(runs_field "$log" replica | tr '\n' ' ')'; "
  [[ $(runs_field "$log" experiment | sort -u | wc -l) -eq 1 && $(runs_field "$log" experiment | wc -l) -eq $n ]] \
    || problems+="experiment ids: '$(runs_field "$log" experiment | sort -u | tr '\n' ' ')'; "
  [[ "$(runs_field "$log" count | sort -u)" == "$n" ]] || problems+="count params: '$(runs_field "$log" count | sort -u | tr '\n' ' ')'; "
  local got
  got=$(paste -d: <(runs_field "$log" replica) <(runs_field "$log" workload) | sort -t: -k1,1n | cut -d: -f2 | tr '\n' ' ')
  [[ "$got" == "${want_workloads[*]} " ]] || problems+="workloads by replica '$got', want '${want_workloads[*]}'; "
  [[ "$(runs_flag "$log" -p | sort -u)" == "acme/coload" && "$(runs_flag "$log" -q | sort -u)" == "agent-1/gpu-queue" ]] \
    || problems+="project/queue not passed with -p/-q; "
  [[ $(runs_flag "$log" -f | sort -u) == "$component" ]] || problems+="-f is not the component; "
  ! grep -qx -- '-u' "$log" || problems+="an upload flag was passed; "
  [[ $(grep -c '^polyaxon ops artifacts ' "$log.out") -eq $n ]] || problems+="expected $n download commands; "
  [[ "$(grep '^bench-summarize ' "$log.out" | sed 's/ --out .*//')" == "bench-summarize$(for ((k = 0; k < n; k++)); do printf ' downloaded/worker-%d' "$k"; done)" ]] \
    || problems+="no bench-summarize line over worker-0..$((n - 1)); "
  if [[ -z "$problems" ]]; then ok "$name"; else bad "$name" "$problems"$'\n'"$(cat "$log.out")"; fi
}
common=(--project acme/coload --queue agent-1/gpu-queue --node gpu-node-1)
log="$work/launch.log"

if run_launch "$log" "${common[@]}" --mode mig --workload train --count 7; then
  assert_cohort "homogeneous: --workload train --count 7 -> 7 runs, replicas 0..6, one experiment" "$log" 7 train train train train train train train
  first_experiment=$(runs_field "$log" experiment | head -1)
else bad "homogeneous cohort launch exits 0" "$(cat "$log.out")"; first_experiment=""; fi

if run_launch "$log" "${common[@]}" --mode timeslice --workload infer=1,train=6; then
  assert_cohort "mixed: infer=1,train=6 -> 7 runs, replica 0 infer, 1..6 train" "$log" 7 infer train train train train train train
  second_experiment=$(runs_field "$log" experiment | head -1)
  if [[ -n "$first_experiment" && "$first_experiment" != "$second_experiment" ]]; then
    ok "each cohort gets a fresh experiment id"
  else bad "each cohort gets a fresh experiment id" "$first_experiment vs $second_experiment"; fi
else bad "mixed cohort launch exits 0" "$(cat "$log.out")"; fi

if run_launch "$log" "${common[@]}" --mode mig --workload train=2,infer=1 --count 3 --experiment fixed-id.1 --window-s 30; then
  assert_cohort "mixed spec order train=2,infer=1 with matching --count 3" "$log" 3 train train infer
  if [[ "$(runs_field "$log" experiment | sort -u)" == fixed-id.1 && "$(runs_field "$log" window_s | sort -u)" == 30 ]]; then
    ok "--experiment and --window-s are passed to every run"
  else bad "--experiment and --window-s are passed to every run" "$(cat "$log")"; fi
else bad "mixed spec with --count launch exits 0" "$(cat "$log.out")"; fi

if run_launch "$log" "${common[@]}" --mode mps --workload train --count 2 --mps-replicas 7 \
  && [[ "$(runs_field "$log" mps_share | sort -u)" == "--mps-replicas 7" && $(runs_field "$log" mps_share | wc -l) -eq 2 ]]; then
  ok "--mode mps --mps-replicas 7 passes -P mps_share to every run (issue 12)"
else bad "--mode mps --mps-replicas 7 passes -P mps_share to every run" "$(cat "$log" "$log.out")"; fi

if run_launch "$log" "${common[@]}" --mode exclusive --workload infer --count 1; then
  assert_cohort "solo baseline: --count 1" "$log" 1 infer
else bad "solo baseline launch exits 0" "$(cat "$log.out")"; fi

if run_launch "$log" "${common[@]}" --mode mig --workload train --count 3 --dry-run \
  && [[ $(runs_count "$log") -eq 0 && $(grep -c '^polyaxon run ' "$log.out") -eq 3 ]]; then
  ok "--dry-run prints 3 polyaxon run commands and submits nothing"
else bad "--dry-run prints 3 polyaxon run commands and submits nothing" "$(cat "$log.out")"; fi

# refused NAME REGEX ARGS...: exits non-zero, says REGEX on stderr/stdout, submits no run.
refused() {
  local name=$1 regex=$2
  shift 2
  if run_launch "$log" "$@"; then
    bad "$name (was accepted)" "$(cat "$log.out")"
  elif ! grep -Eq "$regex" "$log.out"; then
    bad "$name (message lacks /$regex/)" "$(cat "$log.out")"
  elif [[ $(runs_count "$log") -ne 0 ]]; then
    bad "$name (submitted runs anyway)" "$(cat "$log")"
  else
    ok "$name"
  fi
}
refused "refuses --mode mps without a share" "error: --mode mps needs exactly one share" "${common[@]}" --mode mps --workload train --count 2
refused "refuses a missing --queue, explaining the one-job queue" "error: --queue is required.*one job at a time" \
  --project p --node n --mode mig --workload train --count 7
refused "refuses a missing --project" "error: --project is required" --queue a/q --node n --mode mig --workload train --count 7
refused "refuses a missing --node" "error: --node is required" --project p --queue a/q --mode mig --workload train --count 7
refused "refuses a missing --mode" "error: --mode is required" --project p --queue a/q --node n --workload train --count 7
refused "refuses an unknown --mode" "error: --mode 'timeshare' is not one of" "${common[@]}" --mode timeshare --workload train --count 7
refused "refuses a missing --workload" "error: --workload is required" "${common[@]}" --mode mig --count 7
refused "refuses an unknown workload" "error: --workload 'trian'" "${common[@]}" --mode mig --workload trian --count 7
refused "refuses a homogeneous workload without --count" "error: --count is required" "${common[@]}" --mode mig --workload train
refused "refuses --count 0" "error: --count must be at least 1" "${common[@]}" --mode mig --workload train --count 0
refused "refuses a non-numeric --count" "error: --count must be a whole number" "${common[@]}" --mode mig --workload train --count seven
refused "refuses a malformed mixed spec" "error: bad part 'infer=x'" "${common[@]}" --mode mig --workload infer=x,train=6
refused "refuses a mixed spec part of zero workers" "asks for no worker" "${common[@]}" --mode mig --workload infer=0,train=6
refused "refuses --count that contradicts the mixed spec" "error: --count 8 does not match" "${common[@]}" --mode mig --workload infer=1,train=6 --count 8
refused "refuses a bad --experiment" "error: --experiment 'a/b'" "${common[@]}" --mode mig --workload train --count 2 --experiment a/b
refused "refuses an unknown argument" "error: unknown argument '--gpus'" "${common[@]}" --mode mig --workload train --count 2 --gpus 2
refused "refuses a flag without its value" "error: --node needs a value" --project p --queue a/q --node --mode mig --workload train --count 2
if STUB_FAIL_AT=4 run_launch "$log" "${common[@]}" --mode mig --workload train --count 7; then
  bad "a failed submission (replica 3) exits non-zero" "$(cat "$log.out")"
elif grep -q "submitting replica 3 failed" "$log.out" && [[ $(grep -c 'polyaxon ops stop' "$log.out") -eq 3 ]]; then
  ok "a failed submission (replica 3) exits non-zero and lists the 3 runs to stop"
else bad "a failed submission (replica 3) lists the runs to stop" "$(cat "$log.out")"; fi
if "$launch" --help | grep -q "one job at a time"; then ok "--help explains the queue requirement"; else bad "--help explains the queue requirement"; fi

echo "== launch-job.sh and collect-artifacts.sh (recording kubectl stub)"
lj="$deploy/k8s/launch-job.sh"
for res in nvidia.com/gpu nvidia.com/gpu.shared nvidia.com/mig-1g.10gb nvidia.com/mig-1g.18gb; do
  out="$work/job-${res//\//_}.yaml"
  if "$lj" --dry-run --node gpu-node-1 --mode mig --workload infer=1,train=6 --resource "$res" >"$out" 2>"$out.err"; then
    if kval 1.31.0 "$out" >/dev/null 2>&1 && "$py" "$check" job "$out" \
      && [[ $(grep -c "^              $res: 1  # coload:gpu-resource\$" "$out") -eq 2 ]]; then
      ok "rendered Job for $res validates and keeps its invariants"
    else bad "rendered Job for $res validates and keeps its invariants" "$(kval 1.31.0 "$out" 2>&1)"; fi
  else bad "launch-job.sh --dry-run for $res" "$(cat "$out.err")"; fi
done
klog="$work/kubectl.log"
rm -f "$klog"*
: >"$klog"
if STUB_LOG="$klog" PATH="$stubs:$PATH" "$lj" --node gpu-node-1 --mode timeslice --workload train --count 4 \
  --resource nvidia.com/gpu.shared --namespace bench >"$klog.out" 2>&1 \
  && [[ -f "$klog.created-1" ]] && grep -q '^--namespace bench create -f -$' "$klog" \
  && grep -q '^  completions: 4  # coload:count$' "$klog.created-1" \
  && grep -q 'value: "train train train train"  # coload:workloads' "$klog.created-1" \
  && grep -q 'collect-artifacts.sh --experiment [0-9a-f-]* --count 4 --namespace bench' "$klog.out"; then
  ok "launch-job.sh creates one Job of 4 indexes in the namespace and prints the collect command"
else bad "launch-job.sh creates one Job of 4 indexes in the namespace" "$(cat "$klog" "$klog.out" 2>/dev/null)"; fi
out="$work/job-mps.yaml"
if "$lj" --dry-run --node gpu-node-1 --mode mps --workload infer=1,train=6 --mps-replicas 7 >"$out" 2>"$out.err" \
  && kval 1.31.0 "$out" >/dev/null 2>&1 && "$py" "$check" job "$out" \
  && grep -q '^              value: "--mps-replicas 7"  # coload:mps-share$' "$out" \
  && grep -q '^              value: "mps"  # coload:mode$' "$out"; then
  ok "launch-job.sh --mode mps --mps-replicas 7 passes the device plugin's share to every worker (issue 12)"
else bad "launch-job.sh --mode mps --mps-replicas 7 passes the share" "$(cat "$out.err" "$out")"; fi
for bad_args in "--node n --mode mps --workload train --count 2|--mode mps needs exactly one share" \
  "--node n --mode mps --workload train --count 2 --mps-replicas 7 --mps-unlimited|--mode mps needs exactly one share" \
  "--node n --mode timeslice --workload train --count 2 --mps-replicas 7|--mps-replicas declares an MPS share, but --mode is timeslice" \
  "--node n --mode mps --workload train --count 2 --mps-replicas 0|--mps-replicas must be a whole number from 1 to 100" \
  "--node n --mode mps --workload train --count 2 --mps-threads 50 --mps-memory 20G|--mps-memory must be a size such as 20GiB" \
  "--mode mig --workload train --count 2|--node is required" \
  "--node n --mode mig --workload train --count 2 --resource nvidia.com/tpu|--resource 'nvidia.com/tpu'" \
  "--node n --mode mig --workload train --count 2 --experiment Has_Upper|--experiment 'Has_Upper'" \
  "--node n --mode exclusiv --workload train --count 2|--mode 'exclusiv'" \
  "--node n --mode mig --workload train=1,infer=1 --count 3|--count 3 does not match"; do
  args=${bad_args%%|*} want=${bad_args#*|}
  # shellcheck disable=SC2086 # the arguments are split on purpose
  if out=$("$lj" --dry-run $args 2>&1); then
    bad "launch-job.sh refuses: $args (was accepted)"
  elif grep -qF -- "$want" <<<"$out"; then ok "launch-job.sh refuses: $args"
  else bad "launch-job.sh refuses: $args (message lacks '$want')" "$out"; fi
done

ca="$deploy/k8s/collect-artifacts.sh"
dl="$work/downloaded"
rm -f "$klog"*
: >"$klog"
if STUB_LOG="$klog" PATH="$stubs:$PATH" "$ca" --experiment exp-1 --count 3 --download-dir "$dl" >"$klog.out" 2>&1 \
  && [[ -f "$dl/worker-0/worker.json" && -f "$dl/worker-1/worker.json" && -f "$dl/worker-2/worker.json" ]] \
  && [[ $(grep -c '^cp ' "$klog") -eq 3 ]] && grep -q '^delete pod coload-collect-exp-1' "$klog" \
  && grep -q "^bench-summarize $dl/worker-0 $dl/worker-1 $dl/worker-2 --out exp-1.summary.json" "$klog.out" \
  && "$bin/kubernetes-validate" --strict --quiet -k 1.31.0 "$klog.created-1" >/dev/null; then
  ok "collect-artifacts.sh copies worker-0..2 through a valid reader Pod, deletes it, prints the summarize command"
else bad "collect-artifacts.sh copies worker-0..2" "$(cat "$klog" "$klog.out" 2>/dev/null)"; fi
if STUB_LOG="$klog" PATH="$stubs:$PATH" "$ca" --experiment exp-1 --count 3 --download-dir "$dl" >"$klog.out" 2>&1; then
  bad "collect-artifacts.sh refuses to overwrite an earlier download (was accepted)"
elif grep -q "worker-0 already exists" "$klog.out"; then ok "collect-artifacts.sh refuses to overwrite an earlier download"
else bad "collect-artifacts.sh refuses to overwrite an earlier download" "$(cat "$klog.out")"; fi
if STUB_MISSING="1" STUB_LOG="$klog" PATH="$stubs:$PATH" "$ca" --experiment exp-2 --count 3 --download-dir "$work/dl2" >"$klog.out" 2>&1; then
  bad "collect-artifacts.sh fails when a worker left nothing (was accepted)"
elif grep -q "no worker.json for replica(s) 1 of exp-2" "$klog.out"; then ok "collect-artifacts.sh fails naming the replica that left no worker.json"
else bad "collect-artifacts.sh fails naming the missing replica" "$(cat "$klog.out")"; fi
for bad_args in "--count 3|--experiment is required" "--experiment e|--count is required" \
  "--experiment e --count 0|--count must be a whole number >= 1" "--experiment ../x --count 1|is not a valid experiment id"; do
  args=${bad_args%%|*} want=${bad_args#*|}
  # shellcheck disable=SC2086 # the arguments are split on purpose
  if out=$(STUB_LOG="$klog" PATH="$stubs:$PATH" "$ca" $args 2>&1); then
    bad "collect-artifacts.sh refuses: $args (was accepted)"
  elif grep -qF -- "$want" <<<"$out"; then ok "collect-artifacts.sh refuses: $args"
  else bad "collect-artifacts.sh refuses: $args (message lacks '$want')" "$out"; fi
done

echo
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
