#!/usr/bin/env python3
"""Static checks of docker/Dockerfile.*: pinned base images (a tag that is not
"latest", or a digest; ARG defaults resolved), a non-root numeric USER in the
final stage, ENTRYPOINT ["brook"], no COPY/ADD of key, certificate, .env or
secret files, no ADD from URLs, multi-stage. Prints ok:/FAIL: lines; exit 1 on
any failure."""
import pathlib
import re
import sys

repo = pathlib.Path(__file__).resolve().parents[2]
failures = 0


def report(good, msg):
    global failures
    print(("ok: " if good else "FAIL: ") + msg)
    failures += 0 if good else 1


def instructions(text):
    """(instruction, arguments) pairs; continuation lines joined, comments dropped."""
    lines, cur = [], ""
    for raw in text.splitlines():
        s = raw.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if cur and s.startswith("#"):
            continue  # a comment inside a continued RUN
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        lines.append(cur)
        cur = ""
    out = []
    for line in lines:
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


SECRET = re.compile(r"(\.pem|\.key|\.crt|\.p12|\.pfx|(^|/)\.env(\.|$)|id_rsa|secret|token|credential|\.npmrc|\.netrc)", re.I)

dockerfiles = sorted((repo / "docker").glob("Dockerfile.*"))
dockerfiles = [d for d in dockerfiles if not d.name.endswith(".dockerignore")]
report(len(dockerfiles) >= 2, f"docker/ has {', '.join(d.name for d in dockerfiles)}")
for df in dockerfiles:
    name = f"docker/{df.name}"
    ins = instructions(df.read_text())
    args = {}
    stages = []  # (image, alias, [instructions])
    for word, rest in ins:
        if word == "ARG":
            key, _, val = rest.partition("=")
            if not stages and val:
                args[key.strip()] = val.strip().strip('"')
        elif word == "FROM":
            parts = rest.split()
            parts = [p for p in parts if not p.startswith("--platform")]
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), parts[0])
            alias = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            stages.append((image, alias, []))
        elif stages:
            stages[-1][2].append((word, rest))
    report(len(stages) >= 2, f"{name}: multi-stage ({len(stages)} stages)")
    aliases = {a for _, a, _ in stages if a}
    for image, alias, _ in stages:
        if image in aliases:
            continue
        m = re.fullmatch(r"([\w./-]+)(?::([\w.-]+))?(?:@sha256:([0-9a-f]{64}))?", image)
        pinned = bool(m) and (m.group(3) or (m.group(2) and m.group(2) != "latest")) and "$" not in image
        report(pinned, f"{name}: FROM {image} is pinned" if pinned else f"{name}: FROM {image} is not pinned (needs a tag other than latest, or a digest)")
        if m and m.group(1) == "debian" and m.group(2):
            dated = re.fullmatch(r"bookworm-\d{8}(-slim)?", m.group(2)) is not None
            report(dated, f"{name}: Debian base {m.group(2)} is a dated bookworm tag")
        if m and m.group(1) == "nvidia/cuda" and m.group(2):
            full = re.fullmatch(r"\d+\.\d+\.\d+-(runtime|devel|base)(-cudnn)?-\w+\d+\.\d+", m.group(2)) is not None
            report(full, f"{name}: CUDA base {m.group(2)} names the full CUDA version and OS")
    final = stages[-1][2] if stages else []
    users = [rest for w, rest in final if w == "USER"]
    user = users[-1] if users else ""
    uid = user.split(":")[0]
    report(bool(user) and uid not in ("root", "0") and uid.isdigit(), f"{name}: final stage USER {user or '(none)'} is a non-root numeric user")
    eps = [rest for w, rest in final if w == "ENTRYPOINT"]
    report(bool(eps) and re.fullmatch(r'\[\s*"(/usr/local/bin/)?brook"\s*\]', eps[-1]) is not None, f"{name}: ENTRYPOINT {eps[-1] if eps else '(none)'} is [\"brook\"]")
    problems = []
    for image, alias, body in stages:
        for w, rest in body:
            if w in ("COPY", "ADD"):
                srcs = [p for p in rest.split() if not p.startswith("--")][:-1]
                if not any(p.startswith("--from") for p in rest.split()):
                    for s in srcs:
                        if SECRET.search(s):
                            problems.append(f"{w} {s}")
                        if s in (".", "./", "*"):
                            problems.append(f"{w} {s} (whole context)")
                if w == "ADD" and re.search(r"https?://", rest):
                    problems.append(f"ADD from a URL: {rest}")
            if w in ("ENV", "ARG") and re.search(r"(PASSWORD|SECRET|TOKEN|API_KEY)\s*=", rest, re.I):
                problems.append(f"{w} {rest}")
    report(not problems, f"{name}: no secrets, keys or whole-context copies" + (f": {problems}" if problems else ""))
    # The build stage has no .git: the commit must come in as an argument and
    # reach CMake ($BROOK_GIT_COMMIT, cmake/version.cmake), or `brook
    # --version` and every manifest say "unknown".
    froms = [i for i, (w, _) in enumerate(ins) if w == "FROM"]
    build_body = ins[froms[0] + 1:froms[1]] if len(froms) >= 2 else []  # ARGs included
    declared = any(w == "ARG" and rest.split("=")[0].strip() == "BROOK_COMMIT" for w, rest in build_body)
    passed = any(w == "RUN" and "BROOK_GIT_COMMIT=${BROOK_COMMIT}" in rest and "scripts/build.sh" in rest
                 for w, rest in build_body)
    report(declared and passed, f"{name}: the build stage passes BROOK_COMMIT to the build as BROOK_GIT_COMMIT")
    # The build stage copies every source folder the top-level CMakeLists.txt
    # adds: one left out fails the image build (serving/, cli/ once were).
    subdirs = re.findall(r"^add_subdirectory\((\w+)", (repo / "CMakeLists.txt").read_text(), re.M)
    copied = {rest.split()[0] for w, rest in build_body if w == "COPY" and len(rest.split()) == 2}
    missing = [d for d in subdirs if d != "tests" and d not in copied]
    report(not missing, f"{name}: the build stage copies every source folder CMake adds"
           + (f" (missing: {', '.join(missing)})" if missing else ""))
    ignore = df.with_name(df.name + ".dockerignore")
    ig = ignore.read_text() if ignore.exists() else ""
    report(all(p in ig for p in ("*.pem", "*.key", ".env", ".git")), f"{name}: {ignore.name} keeps keys, .env and .git out of the context")
    # The `helm test` smoke job (helm/brook/templates/tests/test-chief.yaml)
    # runs /usr/share/brook/smoke/job.yaml on data generated there, as root
    # before the final USER; tests/helm/validate.mjs runs the same arguments.
    smoke = "/usr/share/brook/smoke"
    user_at = max((i for i, (w, _) in enumerate(final) if w == "USER"), default=len(final))
    before_user = final[:user_at]
    copies = [rest for w, rest in before_user
              if w == "COPY" and rest.split() == ["examples/smoke/job.yaml", f"{smoke}/job.yaml"]]
    report(len(copies) == 1 and (repo / "examples/smoke/job.yaml").is_file(),
           f"{name}: final stage COPY examples/smoke/job.yaml {smoke}/job.yaml before USER")
    gens = [rest for w, rest in before_user if w == "RUN" and re.match(r"brook\s+data\s+gen\b", rest)]
    gen = gens[0].split("&&")[0].split() if len(gens) == 1 else []
    out = gen[gen.index("--out") + 1] if "--out" in gen[:-1] else None
    report(out == smoke and all(f in gen for f in ("--train", "--shards", "--seed")),
           f"{name}: final stage RUN brook data gen --out {smoke} (--train, --shards, --seed) before USER"
           + ("" if len(gens) == 1 else f" ({len(gens)} such RUNs)"))
    report(len(gens) == 1 and re.search(r"chmod\s+-R\s+a\+rX", gens[0]) is not None,
           f"{name}: the smoke files are made world-readable (chmod -R a+rX)")
    ignored = [line.strip() for line in ig.splitlines() if line.strip() and not line.startswith("#")]
    report(not any(pat.rstrip("/") in ("examples", "**/examples", "examples/smoke", "*.yaml", "**/*.yaml") for pat in ignored),
           f"{name}: {ignore.name} lets examples/smoke/job.yaml into the context")

build = repo / "docker" / "build.sh"
text = build.read_text() if build.exists() else ""
report(build.exists() and "Dockerfile.cpu" in text and "Dockerfile.cuda" in text and "set -euo pipefail" in text,
       "docker/build.sh builds both images under set -euo pipefail")
sys.exit(1 if failures else 0)
