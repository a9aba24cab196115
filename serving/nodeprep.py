"""Node preparation for the local model cache: the cache disk where KServe's node agent looks.

KServe v0.20.0's node agent (chart kserve-localmodel-resources, files/resources.yaml) mounts the
fixed host path `/models` at `/mnt/models` and checks `<mount>/models/<storage key>` for each
cached model (pkg/controller/v1alpha1/localmodelnode: `MountPath = "/mnt/models"`,
`modelsRootFolder = MountPath/models`); the download Job writes through the node group's
PersistentVolume with `subPath: models/<storage key>`. Both meet only if the PV's host path is
that same `/models` (upstream's own TODO in platform_default.go says nothing enforces it). So
every NVMe node gets `/models` bound onto its NVMe by this privileged DaemonSet, which on AKS
first assembles the raw NVMe drives into one RAID0 array (AKS mounts only the temp disk).
"""

from __future__ import annotations

from typing import Any

# The agent's hostPath (files/resources.yaml, DaemonSet kserve-localmodelnode-agent, volume
# `models`); the chart has no value for it (`kserve.localmodel.agent.hostPath` is read by no
# template at v0.20.0).
AGENT_HOST_PATH = "/models"
# The owner of the cache directory: the chart's default fsGroup of the download Jobs
# (`kserve.localmodel.securityContext.fsGroup: 1000`), so the Jobs and the agent can write it.
CACHE_GID = 1000
NODE_PREP_NAME = "rtip-nvme-cache"
# Azure presents each local NVMe drive with this model string; remote (OS/data) disks on
# NVMe-capable sizes show as "MSFT NVMe Accelerator", and are never touched.
AZURE_LOCAL_NVME_MODEL = "Microsoft NVMe Direct Disk"
RAID_DEVICE = "/dev/md/rtip-cache"

_ASSEMBLE = """\
if ! mountpoint -q "$CACHE"; then
  if [ ! -e "$MD" ]; then
    mdadm --assemble --scan >/dev/null 2>&1 || true
  fi
  if [ ! -e "$MD" ]; then
    DEVS=""
    for d in /sys/block/nvme*n1; do
      [ -e "$d/device/model" ] || continue
      grep -q "$MODEL" "$d/device/model" || continue
      DEVS="$DEVS /dev/${d##*/}"
    done
    [ -n "$DEVS" ] || { echo "no local NVMe drive ($MODEL) on this node" >&2; exit 1; }
    set -- $DEVS
    # --force: mdadm refuses a one-drive RAID0 without it (NC40ads_H100_v5 has one drive).
    mdadm --create "$MD" --level=0 --raid-devices=$# --force --run "$@"
  fi
  blkid "$MD" >/dev/null 2>&1 || mkfs.ext4 -F -m 0 -E lazy_itable_init=1,lazy_journal_init=1 "$MD"
  mkdir -p "$CACHE"
  mount -o noatime "$MD" "$CACHE"
fi
"""

_BIND = """\
mkdir -p "$CACHE/models" "$HOSTPATH"
if ! mountpoint -q "$HOSTPATH"; then
  mount --bind "$CACHE/models" "$HOSTPATH"
  # An agent that started first holds the root disk's /models: restart its container so the
  # runtime binds the NVMe-backed path (the pod's hostPath is bound at container start).
  for p in $(crictl pods -q --namespace kserve --name kserve-localmodelnode-agent 2>/dev/null); do
    crictl ps -q --pod "$p" | xargs -r crictl stop >/dev/null 2>&1 || true
  done
fi
mkdir -p "$HOSTPATH/models"
chgrp "$GID" "$HOSTPATH" "$HOSTPATH/models"
chmod 2775 "$HOSTPATH" "$HOSTPATH/models"
"""


def prep_script(nvme_path: str, assemble: bool) -> str:
    """The shell run in the host's mount namespace: (AKS) build and mount the RAID0 array at
    `nvme_path`, then bind `<nvme_path>/models` onto the agent's `/models`. Idempotent: a node
    restart re-runs it, and a reboot of an Azure VM leaves its NVMe drives raw again."""
    head = (f'set -eu\nCACHE="{nvme_path.rstrip("/")}"\nHOSTPATH="{AGENT_HOST_PATH}"\n'
            f'MD="{RAID_DEVICE}"\nMODEL="{AZURE_LOCAL_NVME_MODEL}"\nGID={CACHE_GID}\n')
    return head + (_ASSEMBLE if assemble else "") + _BIND


def node_prep_daemonset(namespace: str, nvme_path: str, assemble: bool, image: str,
                        node_selector: dict[str, str],
                        tolerations: list[dict[str, str]]) -> dict[str, Any]:
    """The DaemonSet on one kind of NVMe node (same path and assembly step)."""
    labels = {"app.kubernetes.io/name": NODE_PREP_NAME, "app.kubernetes.io/managed-by": "rtip"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NODE_PREP_NAME, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": NODE_PREP_NAME}},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "nodeSelector": dict(node_selector),
                    "tolerations": tolerations,
                    # nsenter into PID 1's namespaces: the host's mdadm, mkfs and mounts.
                    "hostPID": True,
                    "automountServiceAccountToken": False,
                    "priorityClassName": "system-node-critical",
                    "initContainers": [{
                        "name": "prepare",
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--pid",
                                    "--", "sh", "-c", prep_script(nvme_path, assemble)],
                        "securityContext": {"privileged": True},
                        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                                      "limits": {"cpu": "1", "memory": "256Mi"}},
                    }],
                    "containers": [{
                        "name": "hold",
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        # Nothing left to do; the pod stays so the DaemonSet reruns the step
                        # only when the node restarts.
                        "command": ["sleep", "infinity"],
                        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                            "runAsUser": 65534, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}},
                        "resources": {"requests": {"cpu": "1m", "memory": "8Mi"},
                                      "limits": {"cpu": "10m", "memory": "32Mi"}},
                    }],
                },
            },
        },
    }


__all__ = ["AGENT_HOST_PATH", "AZURE_LOCAL_NVME_MODEL", "CACHE_GID", "NODE_PREP_NAME", "RAID_DEVICE",
           "node_prep_daemonset", "prep_script"]
