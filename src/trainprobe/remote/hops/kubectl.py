"""``kubectl=POD[,namespace=NS][,container=C][,context=CTX]``: ``kubectl exec -i POD -- ...`` (never ``-t``).

POD may be any name ``kubectl exec`` takes, e.g. ``deploy/trainer``. Without ``namespace=``/``context=``
kubectl's own defaults apply (the current context of ``$KUBECONFIG`` or ``~/.kube/config``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainprobe.remote.hops.base import EnteringHop, flag, name_option, spec_with

# first match wins: the specific messages before the generic "not found"
_FAILURES = (
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
class KubectlHop(EnteringHop, kind="kubectl", program="kubectl"):
    failures = _FAILURES
    pod: str
    namespace: str | None = None
    container: str | None = None
    context: str | None = None

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> KubectlHop:
        allowed, example = ("namespace", "container", "context"), "kubectl=trainer-0,namespace=ml"
        pod = cls.parse_name(value, options, allowed, example, "pod name")
        fields = {key: name_option(cls.kind, options, key) for key in ("namespace", "container", "context")}
        return cls(pod=pod, **fields)

    def spec(self) -> str:
        options = (("namespace", self.namespace), ("container", self.container), ("context", self.context))
        return spec_with(f"kubectl={self.pod}", options)

    def wrap(self, inner: Sequence[str]) -> list[str]:
        context, namespace = flag("--context", self.context), flag("--namespace", self.namespace)
        container = flag("--container", self.container)
        return ["kubectl", *context, "exec", "-i", *namespace, self.pod, *container, "--", *inner]

    def failure_values(self) -> Mapping[str, object]:
        return {
            "pod": self.pod,
            "container": self.container or "(default)",
            "where": f" in namespace {self.namespace}" if self.namespace else "",
            "ns_flag": f" -n {self.namespace}" if self.namespace else "",
        }
