#!/usr/bin/env bash
# Copies into dist/chart/files what the Helm chart reads and controller-gen
# writes (the CRDs, the manager's ClusterRole, the webhook configurations),
# with the admin, editor and viewer roles of config/rbac: helm reads no file
# outside the chart. make manifests runs it, as converge does after
# controller-gen.
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist/chart/files
rm -rf "$out"
mkdir -p "$out/crds" "$out/rbac"
shopt -s nullglob
for f in config/crd/bases/*.yaml; do cp "$f" "$out/crds/"; done
for f in config/rbac/*_admin_role.yaml config/rbac/*_editor_role.yaml config/rbac/*_viewer_role.yaml; do cp "$f" "$out/rbac/"; done
cp config/rbac/role.yaml "$out/role.yaml"
if [[ -f config/webhook/manifests.yaml ]]; then cp config/webhook/manifests.yaml "$out/webhooks.yaml"; fi
