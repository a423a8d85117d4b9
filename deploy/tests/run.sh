#!/usr/bin/env bash
# Offline tests of deploy/: every YAML through its validator (and a deliberately broken copy of
# each through the same validator, which must fail), every manifest `bench-cohort` renders from
# the cohort spec (the `article` plan and a plan with serve, model-file, MPS-share and MIG
# cohorts; a hog cohort refused) through kubernetes-validate --strict and Polyaxon's check, the launch and collect
# scripts against recording stubs of `polyaxon` and `kubectl`, and shellcheck. Needs the validators installed by
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
# The toolchain stays where it is when HOME moves (rustup and cargo find it through HOME
# otherwise: building bench-cohort below would find no toolchain).
export RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}"
export CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}"
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


# bench-cohort renders the manifests; it needs no libtorch. BENCH_COHORT names a built one.
if [[ -n "${BENCH_COHORT:-}" ]]; then
  bc=$BENCH_COHORT
else
  target_dir=$("$root/scripts/target-dir")
  (cd "$root" && cargo build --quiet -p bench-cohort) || { echo "error: cannot build bench-cohort" >&2; exit 1; }
  bc="$target_dir/debug/bench-cohort"
fi
[[ -x "$bc" ]] || { echo "error: $bc is not an executable bench-cohort (set BENCH_COHORT)" >&2; exit 1; }
export BENCH_COHORT="$bc"
stubs="$deploy/tests/stubs"

echo "== Polyaxon agent connection"
connection="$deploy/polyaxon/agent-connection.yaml"
expect_pass "agent connection valid (Polyaxon V1Connection + V1ClaimConnection)" "$py" "$check" connection "$connection"
f=$(break_copy "$connection" conn-mount 's/mountPath:/mountpath:/')
expect_fail "broken connection (mountpath) fails the connection schema" "$py" "$check" connection "$f"
f=$(break_copy "$connection" conn-kind 's/kind: volume_claim/kind: volume_clam/')
expect_fail "broken connection (kind volume_clam) fails the connection schema" "$py" "$check" connection "$f"

echo "== Kubernetes static manifests (kubernetes-validate --strict)"
manifests=("$deploy"/k8s/*.yaml "$deploy"/k8s/device-plugin/*.yaml)
for m in "${manifests[@]}"; do
  for v in "${k8s_versions[@]}"; do
    expect_pass "${m#"$deploy"/} validates (kubernetes $v)" kval "$v" "$m"
  done
  f=$(break_copy "$m" "strict-$(basename "$m")" '0,/^metadata:$/s//bogusTopLevelField: true\nmetadata:/')
  expect_fail "broken ${m#"$deploy"/} (unknown top-level field) fails validation" kval 1.31.0 "$f"
done

echo "== rendered from the cohort spec: bench-cohort study --emit, bench-cohort render"
# A plan with every kind of cohort the article plan lacks but a hog: serve (fixed rate and a
# trace), a TorchScript model file, an MPS share as the device plugin gives it, MIG slices.
printf 'not really torchscript\n' >"$work/model.pt"
printf '0.1\n0.2\n0.5\n' >"$work/trace.txt"
cat >"$work/wide.toml" <<TOML
name = "wide"
[flags]
window_s = 30
[[policy]]
name = "timeslice"
mode = "timeslice"
node = "gpu-ts-1"
resource = "nvidia.com/gpu.shared"
[[policy]]
name = "mps-plugin"
mode = "mps"
node = "gpu-mps-1"
resource = "nvidia.com/gpu"
flags = { mps_replicas = 7 }
[[policy]]
name = "mps-explicit"
mode = "mps"
node = "gpu-mps-2"
resource = "nvidia.com/gpu"
flags = { mps_threads = 50, mps_memory = "20GiB" }
[[policy]]
name = "mig"
mode = "mig"
node = "gpu-mig-1"
resource = "nvidia.com/mig-1g.18gb"
[[policy]]
name = "mig-ts"
mode = "mig-timeslice"
node = "gpu-mig-2"
resource = "nvidia.com/mig-2g.35gb.shared"
[[policy]]
name = "mig-me"
mode = "mig"
node = "gpu-mig-3"
mig_profile = "1g.10gb+me"
[[cohort]]
workers = "serve=1,train=6"
policies = ["timeslice", "mps-plugin"]
flags = { rate = 250, slo_ms = 25, max_batch = 16, max_queue_delay_ms = 2 }
[[cohort]]
name = "serve-trace"
workers = "serve=1,infer=2"
policies = ["mps-explicit"]
flags = { arrivals_file = "$work/trace.txt", arrivals = "uniform" }
[[cohort]]
workers = "train=3"
policies = ["mig-me"]
[[cohort]]
name = "model-file"
workers = "infer=1,train=2"
policies = ["mig-ts", "timeslice"]
flags = { model_file = "$work/model.pt", input_shape = "3,224,224", num_classes = 1000 }
TOML
# The article plan names no MIG resource: a MIG policy's key is never guessed.
article_mig=(--resource mig=nvidia.com/mig-1g.18gb --resource mig-timeslice=nvidia.com/mig-1g.18gb)
if out=$("$bc" study article --backend kubernetes --emit "$work/emit-article-nokey" 2>&1); then
  bad "a MIG policy without a resource key is refused, even with --emit (was accepted)" "$out"
elif grep -q "names no \`resource\` or \`mig_profile\`" <<<"$out"; then ok "a MIG policy without a resource key is refused, even with --emit"
else bad "a MIG policy without a resource key is refused, even with --emit" "$out"; fi
for plan in article "$work/wide.toml"; do
  label=$(basename "$plan" .toml)
  extra=()
  [[ $label != article ]] || extra=("${article_mig[@]}")
  out="$work/emit-$label-k8s"
  if "$bc" study "$plan" --backend kubernetes --emit "$out" "${extra[@]}" >"$out.log" 2>&1; then
    files=("$out"/*.yaml)
    ok "study $label --backend kubernetes --emit writes ${#files[@]} Jobs"
    for v in "${k8s_versions[@]}"; do
      expect_pass "every rendered Job of $label validates (kubernetes $v, strict)" kval "$v" "${files[@]}"
    done
    expect_pass "every rendered Job of $label keeps the cohort invariants" "$py" "$check" job "${files[@]}"
  else bad "study $label --backend kubernetes --emit" "$(cat "$out.log")"; files=(); fi
  pout="$work/emit-$label-polyaxon"
  if "$bc" study "$plan" --backend polyaxon --emit "$pout" "${extra[@]}" >"$pout.log" 2>&1; then
    ops=("$pout"/*/replica-*.yaml)
    ok "study $label --backend polyaxon --emit writes ${#ops[@]} operations"
    expect_pass "every rendered operation of $label passes Polyaxon's check (check_polyaxonfile)" \
      "$py" "$deploy/tests/check-polyaxon.py" "${ops[@]}"
    expect_pass "the first operation of $label passes the CLI's polyaxon check" "$bin/polyaxon" check -f "${ops[0]}"
    "$py" "$check" pod-from-operation "${ops[0]}" >"$work/op-pod-$label.yaml"
    expect_pass "an operation's container of $label validates as a Pod (kubernetes 1.31, strict)" kval 1.31.0 "$work/op-pod-$label.yaml"
    expect_pass "every launch.sh of $label passes shellcheck" "$bin/shellcheck" -s sh "$pout"/*/launch.sh
  else bad "study $label --backend polyaxon --emit" "$(cat "$pout.log")"; fi
done
# The validators are not asleep: broken copies of rendered files fail them.
jobs_wide=("$work"/emit-wide-k8s/*.yaml)
job=${jobs_wide[0]}
f=$(break_copy "$job" job-type 's/^  backoffLimit: 0$/  backoffLimit: "zero"/')
expect_fail "a rendered Job with backoffLimit \"zero\" fails kubernetes-validate" kval 1.31.0 "$f"
f=$(break_copy "$job" job-field 's/^  completionMode: /  completionMod: /')
expect_fail "a rendered Job with an unknown field fails kubernetes-validate --strict" kval 1.31.0 "$f"
f=$(break_copy "$job" job-retry 's/^  backoffLimit: 0$/  backoffLimit: 3/')
expect_fail "a rendered Job that retries fails the cohort invariants" "$py" "$check" job "$f"
f=$(break_copy "$job" job-seccomp 's/^          type: "RuntimeDefault"$/          type: "Unconfined"/')
expect_fail "a rendered Job whose Pods are Unconfined fails the restricted Pod Security check" "$py" "$check" job "$f"
f=$(break_copy "$job" job-ttl '/^  ttlSecondsAfterFinished: /d')
expect_fail "a rendered Job without ttlSecondsAfterFinished fails the cohort invariants" "$py" "$check" job "$f"
ops_wide=("$work"/emit-wide-polyaxon/*/replica-0.yaml)
op=${ops_wide[0]}
f=$(break_copy "$op" op-kind 's/^    kind: "job"$/    kind: "jobb"/')
expect_fail "an operation with run kind jobb fails Polyaxon's check" "$py" "$deploy/tests/check-polyaxon.py" "$f"
f=$(break_copy "$op" op-field 's/^    container:$/    containr:/')
expect_fail "an operation with an unknown run field fails Polyaxon's check" "$py" "$deploy/tests/check-polyaxon.py" "$f"
# Model files: the Job says where the claim must hold the file, and checks its SHA-256.
mf="$work/emit-wide-k8s/timeslice-model-file-r1.yaml"
sha=$(sha256sum "$work/model.pt" | cut -d' ' -f1)
if grep -q "coload-files/$sha-model.pt" "$mf" && grep -q "sha256sum -c --status" "$mf"; then
  ok "a model-file cohort's Job reads the file from the claim by its SHA-256 and checks it"
else bad "a model-file cohort's Job reads the file from the claim by its SHA-256" "$(grep -n 'model' "$mf")"; fi
if out=$("$bc" study article --backend kubernetes --emit "$work/emit-article-k8s" "${article_mig[@]}" 2>&1); then
  bad "--emit into a folder holding earlier manifests is refused (was accepted)"
elif grep -q "already exists; nothing is overwritten" <<<"$out"; then ok "--emit never overwrites an earlier manifest"
else bad "--emit never overwrites an earlier manifest" "$out"; fi
# MIG keys as the device plugin writes them: 1g.10gb+me is nvidia.com/mig-1g.10gb.me.
me_jobs=("$work"/emit-wide-k8s/mig-me-*.yaml)
me_job=${me_jobs[0]}
if [[ -f "$me_job" ]] && grep -q '^ *nvidia.com/mig-1g.10gb.me: 1$' "$me_job" && ! grep -q '^ *nvidia.com/gpu: ' "$me_job"; then
  ok "a policy's mig_profile 1g.10gb+me requests nvidia.com/mig-1g.10gb.me, never nvidia.com/gpu"
else bad "a policy's mig_profile 1g.10gb+me requests nvidia.com/mig-1g.10gb.me" "$(grep -n 'nvidia.com/' "${me_job:-/dev/null}")"; fi
mig_ops=("$work"/emit-wide-polyaxon/mig-*/replica-*.yaml)
if [[ ${#mig_ops[@]} -gt 0 && -f "${mig_ops[0]}" ]] && ! grep -q '^ *nvidia.com/gpu: ' "${mig_ops[@]}" \
  && [[ $(grep -l '^ *nvidia.com/mig-[^:]*: 1$' "${mig_ops[@]}" | wc -l) -eq ${#mig_ops[@]} ]]; then
  ok "every Polyaxon operation of a MIG policy (${#mig_ops[@]}) requests its MIG key, none nvidia.com/gpu"
else bad "every Polyaxon operation of a MIG policy requests its MIG key" "$(grep -n 'nvidia.com/' "${mig_ops[@]}" 2>&1 | head)"; fi
for bad_args in "--mode mig --resource nvidia.com/tpu|is not one the NVIDIA device plugin advertises" \
  "--resource nvidia.com/mig-1g.18gb --mode timeslice|is a MIG slice, but the policy's mode is timeslice" \
  "--mode mig --resource nvidia.com/mig-1g.10gb+me|is not one the NVIDIA device plugin advertises" \
  "--mode mig --resource nvidia.com/mig-1g.18gb.shared|two workers of a mig cohort could get one device" \
  "--mode mig|--mode mig needs --resource" \
  "--mode mig --resource nvidia.com/mig-1g.18gb --node Bad_Node|is not a valid node name" \
  "--mode mps|--mode mps needs the share"; do
  args=${bad_args%%|*} want=${bad_args#*|}
  # shellcheck disable=SC2086 # the arguments are split on purpose
  if out=$("$bc" render kubernetes --node n1 --workers train=2 $args 2>&1); then
    bad "render refuses: $args (was accepted)" "$out"
  elif grep -qF -- "$want" <<<"$out"; then ok "render refuses: $args"
  else bad "render refuses: $args (message lacks '$want')" "$out"; fi
done

echo "== DRA: a claim per cohort (resource.k8s.io/v1, Kubernetes 1.34 and later)"
cat >"$work/dra.toml" <<'TOML'
name = "dra"
[[policy]]
name = "exclusive"
mode = "exclusive"
sharing = "dra"
node = "gpu-dra-1"
[[policy]]
name = "timeslice"
mode = "timeslice"
sharing = "dra"
node = "gpu-dra-1"
flags = { timeslice_interval = "medium" }
[[policy]]
name = "mps"
mode = "mps"
sharing = "dra"
node = "gpu-dra-1"
flags = { mps_threads = 25, mps_memory = "35GiB" }
[[policy]]
name = "mig"
mode = "mig"
sharing = "dra"
node = "gpu-dra-mig-1"
mig_profile = "1g.18gb"
[[cohort]]
workers = "infer=1,train=6"
TOML
dra_out="$work/emit-dra"
if "$bc" study "$work/dra.toml" --backend kubernetes --emit "$dra_out" >"$dra_out.log" 2>&1; then
  dra_files=("$dra_out"/*.yaml)
  ok "study --backend kubernetes --emit writes ${#dra_files[@]} claim-and-Job streams for a DRA plan"
  for v in 1.34.0 1.37.0; do
    expect_pass "every rendered ResourceClaim, ResourceClaimTemplate and Job validates (kubernetes $v, strict)" kval "$v" "${dra_files[@]}"
  done
  f=$(break_copy "$dra_out/timeslice-infer1-train6-r1.yaml" dra-field 's/^      - exactly:$/      - exactlyy:/')
  expect_fail "a claim with an unknown request field fails kubernetes-validate --strict" kval 1.34.0 "$f"
else bad "study --backend kubernetes --emit of a DRA plan" "$(cat "$dra_out.log")"; fi
for bad_args in "--mode mps --mps-replicas 7|--mps-replicas N is the device plugin's MPS share" \
  "--mode mig|selects MIG devices by profile" \
  "--mode timeslice --resource nvidia.com/gpu|is the device plugin's resource key"; do
  args=${bad_args%%|*} want=${bad_args#*|}
  # shellcheck disable=SC2086 # the arguments are split on purpose
  if out=$("$bc" render kubernetes --sharing dra --node n1 --workers train=2 $args 2>&1); then
    bad "render --sharing dra refuses: $args (was accepted)" "$out"
  elif grep -qF -- "$want" <<<"$out"; then ok "render --sharing dra refuses: $args"
  else bad "render --sharing dra refuses: $args (message lacks '$want')" "$out"; fi
done
# A hog cohort is refused on a cluster (its order and its device cannot be kept), by render and
# by study --emit alike.
if out=$("$bc" render kubernetes --node n1 --workers hog=1,train=2 --mode timeslice 2>&1); then
  bad "render refuses a hog cohort (was accepted)" "$out"
elif grep -qF "has a hog, which a cluster backend does not run" <<<"$out"; then ok "render refuses a hog cohort"
else bad "render refuses a hog cohort (message lacks the reason)" "$out"; fi
printf '[[policy]]\nname = "ts"\nmode = "timeslice"\nnode = "n1"\nresource = "nvidia.com/gpu"\n[[cohort]]\nworkers = "hog=1,train=2"\n[[cohort]]\nworkers = "train=2"\n' >"$work/hog.toml"
if out=$("$bc" study "$work/hog.toml" --backend kubernetes --emit "$work/emit-hog" 2>&1) \
  && grep -qF "has a hog, which a cluster backend does not run" <<<"$out" \
  && [[ $(find "$work/emit-hog" -name '*.yaml' | wc -l) -eq 1 ]] && [[ ! -e "$work/emit-hog/ts-hog1-train2-r1.yaml" ]]; then
  ok "study --emit leaves a hog cohort out, saying why, and writes the others"
else bad "study --emit leaves a hog cohort out, saying why, and writes the others" "$out $(ls "$work/emit-hog" 2>&1)"; fi

echo "== launch-job.sh and launch-cohort.sh (thin wrappers of bench-cohort render)"
lj="$deploy/k8s/launch-job.sh"
klog="$work/kubectl.log"
rm -f "$klog"*
: >"$klog"
if STUB_LOG="$klog" PATH="$stubs:$PATH" "$lj" --namespace bench --node gpu-ts-1 --resource nvidia.com/gpu.shared \
  --workers serve=1,train=3 --mode timeslice --rate 100 >"$klog.out" 2>&1 \
  && [[ -f "$klog.created-1" ]] && grep -q '^--namespace bench create -f -$' "$klog" \
  && kval 1.31.0 "$klog.created-1" >/dev/null 2>&1 \
  && grep -q '^  completions: 4$' "$klog.created-1" \
  && grep -q "0) set -- \"\$@\" '--workload' 'serve'" "$klog.created-1" \
  && grep -q 'collect-artifacts.sh --experiment timeslice-serve1-train3-[0-9t]*-[0-9a-f]* --count 4 --namespace bench' "$klog.out"; then
  ok "launch-job.sh creates the rendered Job of 4 indexes in the namespace and prints the collect command"
else bad "launch-job.sh creates the rendered Job" "$(cat "$klog" "$klog.out" 2>/dev/null)"; fi
if out=$("$lj" --dry-run --node n1 --workers train=2 --mode mps 2>&1); then
  bad "launch-job.sh passes render's refusal on (was accepted)" "$out"
elif grep -q "mode mps needs the share" <<<"$out"; then ok "launch-job.sh passes render's refusal on (mps without a share)"
else bad "launch-job.sh passes render's refusal on" "$out"; fi
lc="$deploy/polyaxon/launch-cohort.sh"
plog="$work/polyaxon.log"
rm -f "$plog"*
: >"$plog"
if STUB_LOG="$plog" PATH="$stubs:$PATH" "$lc" --project acme/coload --queue agent-1/gpu-queue --dir "$work/pcohort" \
  --node gpu-mps-1 --resource nvidia.com/gpu --workers infer=1,train=2 --mode mps --mps-replicas 7 >"$plog.out" 2>&1 \
  && [[ $(grep -cx run "$plog") -eq 3 ]] \
  && [[ $(grep -c "^$work/pcohort/replica-[012].yaml$" "$plog") -eq 3 ]] \
  && [[ $(grep -cx acme/coload "$plog") -eq 3 && $(grep -cx agent-1/gpu-queue "$plog") -eq 3 ]] \
  && grep -q '"--mps-replicas"' "$work/pcohort/replica-2.yaml" \
  && grep -q '"--workload"' "$work/pcohort/replica-0.yaml" \
  && [[ $(grep -ho '"coload-[0-9a-f]*-r[0-9]"' "$work"/pcohort/replica-*.yaml | wc -l) -eq 3 ]]; then
  ok "launch-cohort.sh submits one run per replica (3) of the rendered operations with -p/-q"
else bad "launch-cohort.sh submits one run per replica" "$(cat "$plog" "$plog.out" 2>/dev/null)"; fi
if out=$("$lc" --queue q --node n --workers train=2 --mode timeslice 2>&1); then
  bad "launch-cohort.sh refuses a missing --project (was accepted)"
elif grep -q "error: --project is required" <<<"$out"; then ok "launch-cohort.sh refuses a missing --project"
else bad "launch-cohort.sh refuses a missing --project" "$out"; fi

echo "== device-plugin and MIG layouts"
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
  's/^      h100-80gb-all-1g.10gb:/      all-1g.10gb:/' \
  '/^      h200-141gb-gpu0-7x1g.18gb:/,/mig-enabled: false/s/devices: \[0\]/devices: all/' \
  '/^      h100-80gb-gpu0-hybrid:/,/mig-enabled: false/s/devices: \[1, 2,/devices: [0, 1, 2,/' \
  '/^      a100-80gb-gpu0-7x1g.10gb:/,/mig-enabled: false/s/mig-enabled: false/mig-enabled: true\n          mig-devices:\n            "1g.10gb": 7/'; do
  f=$(break_copy "$mp" "mp-$passed" "$e")
  expect_fail "broken MIG layout ($e) is rejected" "$py" "$check" mig-parted "$f"
done

echo "== shellcheck"
scripts=("$deploy"/polyaxon/*.sh "$deploy"/k8s/*.sh "$deploy"/tests/run.sh "$deploy"/tests/stubs/kubectl "$deploy"/tests/stubs/polyaxon "$root/scripts/provision-tools.sh")
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

echo "== collect-artifacts.sh (recording kubectl stub)"
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
