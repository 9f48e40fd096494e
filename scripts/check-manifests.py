#!/usr/bin/env python3
"""The Kubernetes manifests checked (`make manifests-check`, in `make test`):

1. each overlay of deploy/kubernetes/overlays renders (`kubectl kustomize`);
2. every object of a built-in kind is valid against Kubernetes's published schemas
   (`kubernetes-validate --strict`, which rejects unknown fields);
3. every custom resource is valid against its operator's CRD schema, kept in
   deploy/kubernetes/crds (SOURCES.md names where each comes from), strictly: a field the
   schema does not name is an error, as `kubectl apply --validate=strict` would make it;
4. every setting handed to a container of the seckill image (its `env`, and the ConfigMaps and
   Secrets its `envFrom` names) is one the server reads (docs/configuration.md's table, which a
   test keeps equal to the code), or only a part of another variable's value ($(NAME)), or
   RUST_LOG; its command is one of the server's;
5. the rules of a safe first deploy: no Secret carries a value (the reader creates them, or an
   external store syncs them); a Deployment an autoscaler scales has no `replicas`; the
   migrations Job is named after the release; every process of the image is scrapeable (a
   prometheus.io/port that is one of its container's ports); a default-deny NetworkPolicy, and
   namespaces outside the shop's chosen by label, never by name; Redis has a `maxmemory` and
   `noeviction`; every PostgreSQL pool at its largest fits the Cluster's `max_connections`.

`--self-test` breaks a rendered overlay in each of those ways and fails unless every breakage is
caught. A check that cannot run (no kubectl, no kubernetes-validate) says why and fails.
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KUBE = os.path.join(ROOT, "deploy", "kubernetes")
KUBERNETES_VERSION = "1.37.0"
IMAGE = "seckill"
# Read by the server's log filter (tracing-subscriber), not by its settings.
NOT_SETTINGS = {"RUST_LOG"}


def fail_to_run(why):
    print(f"manifests: cannot check: {why}", file=sys.stderr)
    sys.exit(2)


def settings():
    doc = open(os.path.join(ROOT, "docs", "configuration.md")).read()
    table = doc.split("<!-- settings:begin -->")[1].split("<!-- settings:end -->")[0]
    names = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", table, re.M))
    if len(names) < 20:
        fail_to_run("docs/configuration.md's settings table was not found")
    return names


def commands():
    """The server's subcommands, kebab-cased as clap names them."""
    main = open(os.path.join(ROOT, "server", "src", "main.rs")).read()
    body = main.split("enum Command {")[1].split("\n}\n")[0]
    variants = re.findall(r"^    ([A-Z][A-Za-z]+)\b", body, re.M)
    return {re.sub(r"(?<!^)([A-Z])", r"-\1", v).lower() for v in variants}


def render(overlay):
    if not shutil.which("kubectl"):
        fail_to_run("kubectl is not installed (it renders the Kustomize overlays: `kubectl kustomize`)")
    out = subprocess.run(["kubectl", "kustomize", overlay], capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip()
    return [d for d in yaml.safe_load_all(out.stdout) if d], None


def crd_schemas():
    schemas = {}
    folder = os.path.join(KUBE, "crds")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".yaml"):
            continue
        crd = yaml.safe_load(open(os.path.join(folder, name)))
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served", True):
                schemas[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    return schemas


def strict(schema):
    """The OpenAPI schema as JSON Schema that refuses fields it does not name."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    preserve = out.pop("x-kubernetes-preserve-unknown-fields", False)
    if "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


def check_custom(obj, schemas, errors):
    import jsonschema

    key = (obj.get("apiVersion"), obj.get("kind"))
    schema = schemas.get(key)
    where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    if schema is None:
        errors.append(f"{where}: no CRD schema for {key[0]} {key[1]} in deploy/kubernetes/crds")
        return
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    schema = strict(schema)
    schema.get("properties", {}).pop("metadata", None)
    schema.get("properties", {}).pop("apiVersion", None)
    schema.get("properties", {}).pop("kind", None)
    schema["required"] = [r for r in schema.get("required", []) if r not in ("apiVersion", "kind", "metadata")]
    for error in jsonschema.Draft7Validator(schema).iter_errors(body):
        path = ".".join(str(p) for p in error.absolute_path)
        errors.append(f"{where}: {path or '(top)'}: {error.message[:200]}")


def check_builtin(objects, errors):
    exe = shutil.which("kubernetes-validate")
    if not exe:
        fail_to_run("kubernetes-validate is not installed (pip install kubernetes-validate)")
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, obj in enumerate(objects):
            path = os.path.join(tmp, f"{i:03}-{obj['kind']}-{obj['metadata']['name']}.yaml")
            with open(path, "w") as f:
                yaml.safe_dump(obj, f)
            files.append(path)
        out = subprocess.run(
            [exe, "--strict", "--quiet", "-k", KUBERNETES_VERSION, *files], capture_output=True, text=True
        )
        if out.returncode != 0:
            errors.extend(
                line.replace(tmp + "/", "") for line in (out.stdout + out.stderr).splitlines() if line.strip()
            )


def check_settings(objects, known, verbs, errors):
    maps = {(o["kind"], o["metadata"]["name"]): o for o in objects if o["kind"] in ("ConfigMap", "Secret")}
    for obj in objects:
        spec = obj.get("spec", {})
        pod = spec.get("template", {}).get("spec") if obj["kind"] in ("Deployment", "Job", "StatefulSet") else None
        if not pod:
            continue
        for c in pod.get("initContainers", []) + pod.get("containers", []):
            if c.get("image", "").split("@")[0].split(":")[0].split("/")[-1] != IMAGE:
                continue
            where = f"{obj['kind']}/{obj['metadata']['name']} container {c['name']}"
            names = [e["name"] for e in c.get("env", [])]
            for source in c.get("envFrom", []):
                for kind, ref in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                    if ref in source:
                        m = maps.get((kind, source[ref]["name"]))
                        if m is None:
                            errors.append(f"{where}: {kind} {source[ref]['name']} is not in the manifests")
                            continue
                        names += list(m.get("data", {})) + list(m.get("stringData", {}))
            # $(NAME) is expanded only when NAME is defined earlier (envFrom, then env in order);
            # otherwise the process gets the text "$(NAME)" itself.
            parts, defined = set(), set(names) - {e["name"] for e in c.get("env", [])}
            for e in c.get("env", []):
                for ref in re.findall(r"\$\(([A-Za-z0-9_]+)\)", e.get("value", "")):
                    parts.add(ref)
                    if ref not in defined:
                        errors.append(f"{where}: {e['name']} names $({ref}) before it is defined")
                defined.add(e["name"])
            for name in names:
                if name not in known and name not in parts and name not in NOT_SETTINGS:
                    errors.append(f"{where}: {name} is not a setting the server reads (docs/configuration.md)")
            args = c.get("args") or c.get("command") or []
            if not args or args[0] not in verbs:
                errors.append(f"{where}: {args[:1]} is not a command of the server ({', '.join(sorted(verbs))})")


# PostgreSQL's own reserve (superuser_reserved_connections) and the pools' sizes when unset.
PG_RESERVED = 3
PG_DEFAULT_MAX = 100
DEFAULT_POOL = 32
MIGRATE_POOL = 2


def seckill_containers(obj):
    pod = obj.get("spec", {}).get("template", {}).get("spec") or {}
    return [c for c in pod.get("containers", []) if c.get("image", "").split("@")[0].split(":")[0].split("/")[-1] == IMAGE]


def env_value(container, name, default=None):
    for e in container.get("env", []):
        if e["name"] == name and "value" in e:
            return e["value"]
    return default


def check_deploy_rules(objects, errors):
    by_kind = lambda kind: [o for o in objects if o["kind"] == kind]
    for secret in by_kind("Secret"):
        if secret.get("data") or secret.get("stringData"):
            errors.append(f"Secret/{secret['metadata']['name']}: carries values; secrets are created by the reader or an external store, never committed")
    scaled = {h["spec"]["scaleTargetRef"]["name"]: h for h in by_kind("HorizontalPodAutoscaler")}
    release = next((c["data"].get("release") for c in by_kind("ConfigMap") if c["metadata"]["name"] == "seckill-release"), None)
    if not release:
        errors.append("ConfigMap/seckill-release: missing, or without `release`")
    pools = 0
    for d in by_kind("Deployment") + by_kind("Job"):
        name = d["metadata"]["name"]
        containers = seckill_containers(d)
        if not containers:
            continue
        if d["kind"] == "Job":
            if not release or not name.endswith("-" + release):
                errors.append(f"Job/{name}: a migrations Job must be named after the release ({release})")
            pools += MIGRATE_POOL
            continue
        if name in scaled and "replicas" in d["spec"]:
            errors.append(f"Deployment/{name}: sets replicas, which the HorizontalPodAutoscaler owns (every apply would reset it)")
        most = scaled[name]["spec"]["maxReplicas"] if name in scaled else d["spec"].get("replicas", 1)
        pools += most * int(env_value(containers[0], "SECKILL_DB_CONNECTIONS", DEFAULT_POOL))
        notes = d["spec"]["template"].get("metadata", {}).get("annotations", {})
        ports = {str(p["containerPort"]) for c in containers for p in c.get("ports", [])}
        if notes.get("prometheus.io/scrape") != "true" or notes.get("prometheus.io/port") not in ports:
            errors.append(f"Deployment/{name}: not scrapeable (prometheus.io/scrape and a prometheus.io/port among its ports {sorted(ports)})")
    policies = by_kind("NetworkPolicy")
    if not any(p["spec"].get("podSelector") == {} and set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
               and not p["spec"].get("ingress") and not p["spec"].get("egress") for p in policies):
        errors.append("NetworkPolicy: no default deny (podSelector {} on Ingress and Egress with no rule)")
    for p in policies:
        text = json.dumps(p["spec"])
        if "kubernetes.io/metadata.name" in text:
            errors.append(f"NetworkPolicy/{p['metadata']['name']}: names a namespace; choose it by a label the reader sets")
    redis_conf = [c for c in by_kind("ConfigMap") if c["metadata"]["name"] == "seckill-redis-config"]
    for c in redis_conf:
        conf = "\n".join(c.get("data", {}).values())
        if not re.search(r"^maxmemory \d+", conf, re.M) or not re.search(r"^maxmemory-policy noeviction$", conf, re.M):
            errors.append(f"ConfigMap/{c['metadata']['name']}: Redis needs a maxmemory and maxmemory-policy noeviction")
    for pg in [o for o in objects if o["kind"] == "Cluster" and o["apiVersion"].startswith("postgresql.cnpg.io/")]:
        most = int(pg["spec"].get("postgresql", {}).get("parameters", {}).get("max_connections", PG_DEFAULT_MAX))
        if pools > most - PG_RESERVED:
            errors.append(f"Cluster/{pg['metadata']['name']}: the pools at their largest need {pools} connections, "
                          f"max_connections {most} leaves {most - PG_RESERVED}")


def check(objects, schemas, known, verbs):
    errors = []
    check_deploy_rules(objects, errors)
    custom = [o for o in objects if (o["apiVersion"], o["kind"]) in schemas or "." in o["apiVersion"].split("/")[0]
              and not o["apiVersion"].split("/")[0].endswith(".k8s.io")]
    builtin = [o for o in objects if o not in custom]
    check_builtin(builtin, errors)
    for obj in custom:
        check_custom(obj, schemas, errors)
    check_settings(objects, known, verbs, errors)
    return errors


def overlays():
    folder = os.path.join(KUBE, "overlays")
    return [os.path.join(folder, d) for d in sorted(os.listdir(folder))]


def self_test(schemas, known, verbs):
    """Each breakage must be caught."""
    objects, err = render(overlays()[0])
    if err:
        fail_to_run(err)
    assert not check(objects, schemas, known, verbs), "the overlay itself must pass first"

    def broken(what, edit):
        objs = copy.deepcopy(objects)
        edit(objs)
        found = check(objs, schemas, known, verbs)
        print(f"  {'caught' if found else 'MISSED'}: {what}" + (f" ({found[0][:100]})" if found else ""))
        return bool(found)

    def first(objs, kind):
        return next(o for o in objs if o["kind"] == kind)

    def serve(objs):
        return next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("serve"))

    def worker(objs):
        return next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("worker"))

    def named(objs, kind, name):
        return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)

    cases = [
        ("a setting the server does not read, in the ConfigMap",
         lambda o: first(o, "ConfigMap").setdefault("data", {}).update({"SECKILL_DRAIN_SECONDS": "30"})),
        ("a setting the server does not read, in a container's env",
         lambda o: serve(o)["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "SECKILL_WORKERS", "value": "0"})),
        ("a URL that names a credential defined after it",
         lambda o: serve(o)["spec"]["template"]["spec"]["containers"][0]["env"].sort(key=lambda e: "valueFrom" in e)),
        ("a command the server does not have",
         lambda o: serve(o)["spec"]["template"]["spec"]["containers"][0].update({"args": ["server"]})),
        ("an unknown field of a Deployment",
         lambda o: serve(o)["spec"].update({"replica": 3})),
        ("a wrong type in a Deployment",
         lambda o: serve(o)["spec"].update({"revisionHistoryLimit": "five"})),
        ("an unknown field of a PostgreSQL Cluster",
         lambda o: first(o, "Cluster")["spec"].update({"instance": 3})),
        ("an unknown field of a RabbitmqCluster",
         lambda o: first(o, "RabbitmqCluster")["spec"].update({"replica": 3})),
        ("a wrong type in a RabbitmqCluster",
         lambda o: first(o, "RabbitmqCluster")["spec"].update({"replicas": "three"})),
        ("a Secret with a committed value",
         lambda o: o.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "seckill-secret"},
                             "stringData": {"SECKILL_SECRET": "x" * 64}})),
        ("replicas on the Deployment the autoscaler scales",
         lambda o: serve(o)["spec"].update({"replicas": 3})),
        ("a migrations Job not named after the release",
         lambda o: first(o, "Job")["metadata"].update({"name": "seckill-migrate"})),
        ("a worker Prometheus cannot scrape",
         lambda o: worker(o)["spec"]["template"]["spec"]["containers"][0].pop("ports")),
        ("no default-deny NetworkPolicy",
         lambda o: o.remove(named(o, "NetworkPolicy", "default-deny"))),
        ("a NetworkPolicy naming a namespace",
         lambda o: named(o, "NetworkPolicy", "seckill-serve")["spec"]["ingress"][0]["from"].append(
             {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}})),
        ("Redis without maxmemory",
         lambda o: named(o, "ConfigMap", "seckill-redis-config")["data"].update(
             {k: re.sub(r"(?m)^maxmemory \S+\n", "", v) for k, v in named(o, "ConfigMap", "seckill-redis-config")["data"].items()})),
        ("more pools than PostgreSQL's max_connections",
         lambda o: first(o, "HorizontalPodAutoscaler")["spec"].update({"maxReplicas": 60})),
    ]
    results = [broken(what, edit) for what, edit in cases]
    if not all(results):
        print("manifests: the self-test MISSED a breakage", file=sys.stderr)
        sys.exit(1)
    print(f"manifests: self-test: {len(cases)} of {len(cases)} breakages caught")


def main():
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        fail_to_run("python3 has no jsonschema (pip install kubernetes-validate brings it)")
    schemas = crd_schemas()
    known = settings()
    verbs = commands()
    if "--self-test" in sys.argv:
        self_test(schemas, known, verbs)
        return
    failed = False
    for overlay in overlays():
        objects, err = render(overlay)
        name = os.path.relpath(overlay, ROOT)
        if err:
            print(f"manifests: {name} does not render: {err}", file=sys.stderr)
            failed = True
            continue
        errors = check(objects, schemas, known, verbs)
        kinds = sorted({o["kind"] for o in objects})
        if errors:
            failed = True
            print(f"manifests: {name}: {len(errors)} errors", file=sys.stderr)
            for e in errors:
                print(f"  {e}", file=sys.stderr)
        else:
            print(f"manifests: {name}: {len(objects)} objects valid (Kubernetes {KUBERNETES_VERSION}, "
                  f"{len({k for k in kinds if k in {s[1] for s in schemas}})} kinds of the operators' CRDs), every setting one the server "
                  f"reads: {', '.join(kinds)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
