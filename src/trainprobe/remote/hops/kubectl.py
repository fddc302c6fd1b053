"""``kubectl=POD[,namespace=NS][,container=C][,context=CTX]``: ``kubectl exec -i POD -- ...`` (never ``-t``).

POD may be any name ``kubectl exec`` takes, e.g. ``deploy/trainer``. Without ``namespace=``/``context=``
kubectl's own defaults apply (the current context of ``$KUBECONFIG`` or ``~/.kube/config``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from trainprobe.remote.hops.base import explain_by_table, missing_program, need_value, no_options
from trainprobe.remote.hops.docker import check_name
from trainprobe.remote.hops.records import HopFailure

# first match wins: the specific messages before the generic "not found"
FAILURES = (
    (
        "container not found",
        "pod {pod} has no container {container}",
        "kubectl get pod {pod} -o yaml lists them",
    ),
    ("completed pod", "pod {pod} has completed", "exec needs a running pod"),
    ("is not running", "the container in pod {pod} is not running", "kubectl describe pod {pod} says why"),
    ("unable to connect to the server", "the Kubernetes API server is not reachable", "check the context"),
    ("forbidden", "not allowed to exec into pod {pod}", "exec needs the pods/exec permission"),
    ("not found", "pod {pod} not found{where}", "list the pods: kubectl get pods{ns_flag}"),
)


@dataclass(frozen=True)
class KubectlHop:
    kind: ClassVar[str] = "kubectl"
    pod: str
    namespace: str | None = None
    container: str | None = None
    context: str | None = None

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> KubectlHop:
        no_options(cls.kind, options, ("namespace", "container", "context"))
        pod = check_name(cls.kind, need_value(cls.kind, value, "kubectl=trainer-0,namespace=ml"), "pod name")
        fields = {key: options.get(key) or None for key in ("namespace", "container", "context")}
        for key, val in fields.items():
            if val is not None:
                check_name(cls.kind, val, key)
        return cls(pod=pod, **fields)

    def spec(self) -> str:
        options = (("namespace", self.namespace), ("container", self.container), ("context", self.context))
        return f"kubectl={self.pod}" + "".join(f",{k}={v}" for k, v in options if v)

    def wrap(self, inner: Sequence[str]) -> list[str]:
        context = ["--context", self.context] if self.context else []
        namespace = ["--namespace", self.namespace] if self.namespace else []
        container = ["--container", self.container] if self.container else []
        return ["kubectl", *context, "exec", "-i", *namespace, self.pod, *container, "--", *inner]

    def explain_failure(self, transport_log: str, returncode: int | None = None) -> HopFailure | None:
        """``kubectl``'s words for this hop failing (see FAILURES), or ``kubectl`` not installed."""
        values = {
            "pod": self.pod,
            "container": self.container or "(default)",
            "where": f" in namespace {self.namespace}" if self.namespace else "",
            "ns_flag": f" -n {self.namespace}" if self.namespace else "",
        }
        return missing_program(transport_log, "kubectl", "where this hop runs") or explain_by_table(
            transport_log, FAILURES, values
        )
