#!/usr/bin/env node
// Builds the site as `cargo leptos build` does, with tools that are cheap to get: plain cargo for
// the server and the wasm, wasm-bindgen-cli (the lock file's version), and npm packages that ship
// prebuilt binaries (binaryen's wasm-opt, swc's minifier, lightningcss — the very engines
// cargo-leptos links in). Every setting comes from Cargo.toml's [[workspace.metadata.leptos]],
// which `cargo leptos watch` reads too: one place to change, two ways to build.
//
//   node scripts/site.mjs [--release] [--front-only | --server-only] [--plan] [--dir=PROJECT]
//
// Steps (cargo-leptos 0.3.10's, in its order): the wasm (`cargo build -p <lib-package> --lib
// --target wasm32-unknown-unknown`, target/front), wasm-bindgen (`--target web`, `<name>_bg.wasm`
// renamed `<name>.wasm`), wasm-opt -Oz with bulk memory and non-trapping float-to-int (release), the JS minified (release), the stylesheet
// through lightningcss (minified for the browserslist query in release), the assets folder copied
// into the site root, then with hash-files every file of the pkg folder renamed `<stem>.<hash>.<ext>`
// (MD5, base64url unpadded; other stylesheets and wasm-bindgen's snippets keep their names), the
// JS's references to the renamed files rewritten, and `<target>/<profile>/hash.txt` written
// (`js: …`, `wasm: …`, `css: …`), which the server reads beside its binary. The server: `cargo
// build -p <bin-package> --bin <bin-package>` with the LEPTOS_* variables cargo-leptos sets.
// `--plan` prints the settings and the commands without running them (`make lint` compares
// them with what the metadata says: scripts/check-site.mjs).
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

// The npm tools are this checkout's (e2e/node_modules); the project built is this one or `--dir=`'s
// (scripts/upgrade-check.sh builds the release before with it).
const tools = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const require = createRequire(path.join(tools, "e2e", "package.json"));
const argv = process.argv.slice(2);
const root = path.resolve(argv.find((a) => a.startsWith("--dir="))?.slice(6) ?? tools);
const args = new Set(argv);
const release = args.has("--release");
const front = !args.has("--server-only");
const server = !args.has("--front-only");

/// The cargo-leptos whose steps this build follows (the Makefile's CARGO_LEPTOS_VERSION, checked
/// by scripts/check-site.mjs).
export const FOLLOWS = "0.3.10";

/// The workspace as cargo describes it (`[workspace.metadata]` included).
export function metadata(dir) {
  return JSON.parse(
    execFileSync("cargo", ["metadata", "--no-deps", "--format-version", "1"], { cwd: dir, maxBuffer: 1 << 26 }),
  );
}

/// The keys of [[workspace.metadata.leptos]] this build reads (scripts/check-site.mjs fails on
/// any other: cargo-leptos would honour it and this build would not). The last three only
/// concern `cargo leptos watch` and the server's own build (leptos's erase-components mode is
/// set by .cargo/config.toml for both).
export const KNOWN_KEYS = [
  "name", "bin-package", "lib-package", "bin-default-features", "lib-default-features",
  "bin-features", "lib-features", "lib-profile-release", "lib-profile-dev", "bin-profile-release",
  "bin-profile-dev", "site-root", "site-pkg-dir", "style-file", "assets-dir", "site-addr",
  "browserquery", "hash-files", "js-minify",
  "reload-port", "disable-erase-components",
];

/// A workspace member's folder, relative to the workspace.
function dirOf(meta, name) {
  const pkg = meta.packages.find((p) => p.name === name);
  return path.relative(meta.workspace_root, path.dirname(pkg.manifest_path));
}

/// The project's settings, as cargo-leptos reads them (kebab-case keys, its defaults).
export function settings(meta, release) {
  const m = meta.metadata?.leptos;
  const p = Array.isArray(m) ? m[0] : m;
  if (!p) throw new Error("Cargo.toml has no [[workspace.metadata.leptos]]");
  const dir = (prof) => (prof === "dev" ? "debug" : prof);
  const libProfile = release ? p["lib-profile-release"] ?? "release" : p["lib-profile-dev"] ?? "dev";
  const binProfile = release ? p["bin-profile-release"] ?? "release" : p["bin-profile-dev"] ?? "dev";
  return {
    name: p.name,
    release,
    binPackage: p["bin-package"],
    libPackage: p["lib-package"],
    binDir: dirOf(meta, p["bin-package"]),
    libDir: dirOf(meta, p["lib-package"]),
    binDefaultFeatures: p["bin-default-features"] ?? true,
    libDefaultFeatures: p["lib-default-features"] ?? true,
    binFeatures: p["bin-features"] ?? [],
    libFeatures: p["lib-features"] ?? [],
    libProfile,
    binProfile,
    siteRoot: p["site-root"] ?? "target/site",
    pkgDir: p["site-pkg-dir"] ?? "pkg",
    styleFile: p["style-file"],
    assetsDir: p["assets-dir"],
    siteAddr: p["site-addr"] ?? "127.0.0.1:3000",
    reloadPort: p["reload-port"] ?? 3001,
    browserquery: p.browserquery ?? "defaults",
    hashFiles: p["hash-files"] ?? false,
    jsMinify: release && (p["js-minify"] ?? true),
    frontTarget: "target/front",
    wasm: `target/front/wasm32-unknown-unknown/${dir(libProfile)}/${p["lib-package"].replace(/-/g, "_")}.wasm`,
    hashFile: `target/${dir(binProfile)}/hash.txt`,
  };
}

/// What cargo-leptos puts in the environment of both cargo builds.
export function envs(s) {
  return {
    LEPTOS_OUTPUT_NAME: s.name,
    LEPTOS_SITE_ROOT: s.siteRoot,
    LEPTOS_SITE_PKG_DIR: s.pkgDir,
    LEPTOS_SITE_ADDR: s.siteAddr,
    LEPTOS_RELOAD_PORT: String(s.reloadPort),
    LEPTOS_LIB_DIR: s.libDir,
    LEPTOS_BIN_DIR: s.binDir,
    LEPTOS_JS_MINIFY: String(s.jsMinify),
    LEPTOS_HASH_FILES: String(s.hashFiles),
    ...(s.hashFiles ? { LEPTOS_HASH_FILE_NAME: "hash.txt" } : {}),
  };
}

const profileArgs = (prof) => (prof === "dev" ? [] : prof === "release" ? ["--release"] : [`--profile=${prof}`]);

export function frontCommand(s) {
  return [
    "cargo", "build", `--package=${s.libPackage}`, "--lib", `--target-dir=${s.frontTarget}`,
    "--target=wasm32-unknown-unknown",
    ...(s.libDefaultFeatures ? [] : ["--no-default-features"]),
    ...(s.libFeatures.length ? [`--features=${s.libFeatures.join(",")}`] : []),
    ...profileArgs(s.libProfile),
  ];
}

export function serverCommand(s) {
  return [
    "cargo", "build", `--package=${s.binPackage}`, `--bin=${s.binPackage}`,
    ...(s.binDefaultFeatures ? [] : ["--no-default-features"]),
    ...(s.binFeatures.length ? [`--features=${s.binFeatures.join(",")}`] : []),
    ...profileArgs(s.binProfile),
  ];
}

/// A file's name with its content hash, as cargo-leptos names it.
export function contentHash(bytes) {
  return createHash("md5").update(bytes).digest("base64url");
}

function run(cmd, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd[0], cmd.slice(1), {
      cwd: root,
      stdio: "inherit",
      env: { ...process.env, ...env },
    });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd.join(" ")} exited with ${code}`)),
    );
  });
}

function bin(name) {
  return path.join(tools, "e2e", "node_modules", ".bin", name);
}

async function buildFront(s) {
  const pkg = path.join(root, s.siteRoot, s.pkgDir);
  await run(frontCommand(s), envs(s));
  fs.rmSync(pkg, { recursive: true, force: true });
  fs.mkdirSync(pkg, { recursive: true });
  await run(["wasm-bindgen", "--target=web", `--out-name=${s.name}`, `--out-dir=${pkg}`, path.join(root, s.wasm)]);
  const wasm = path.join(pkg, `${s.name}.wasm`);
  fs.renameSync(path.join(pkg, `${s.name}_bg.wasm`), wasm);
  if (s.release) {
    await run([bin("wasm-opt"), "-Oz", "--enable-bulk-memory", "--enable-nontrapping-float-to-int", wasm, "-o", wasm]);
  }
  const js = path.join(pkg, `${s.name}.js`);
  if (s.jsMinify) {
    const swc = require("@swc/core");
    const out = await swc.minify(fs.readFileSync(js, "utf8"), { compress: true, mangle: true, module: true });
    fs.writeFileSync(js, out.code);
  }
  if (s.styleFile) {
    const css = require("lightningcss");
    const browserslist = require("browserslist");
    const targets = css.browserslistToTargets(browserslist(s.browserquery));
    const { code } = css.transform({
      filename: s.styleFile,
      code: Buffer.from(fs.readFileSync(path.join(root, s.styleFile), "utf8") + "\n"),
      minify: s.release,
      targets,
    });
    fs.writeFileSync(path.join(pkg, `${s.name}.css`), code);
  }
  if (s.assetsDir) {
    fs.cpSync(path.join(root, s.assetsDir), path.join(root, s.siteRoot), { recursive: true });
  }
  if (s.hashFiles) {
    hashSite(s, pkg);
  }
}

/// Every file of the pkg folder under its content hash, the JS's references rewritten, and the
/// hash file the server reads (scripts/site-variant.mjs hashes a variant's so).
export function hashSite(s, pkg, hashFile = path.join(root, s.hashFile)) {
  const site = `${s.name}.css`;
  const hashes = new Map();
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(file);
      } else if (!(entry.name.endsWith(".css") && file !== path.join(pkg, site)) && !file.includes("snippets")) {
        const hash = contentHash(fs.readFileSync(file));
        if (path.parse(file).name !== hash) hashes.set(file, hash);
      }
    }
  };
  walk(pkg);
  const renamed = new Map();
  for (const [file, hash] of hashes) {
    const { dir, name, ext } = path.parse(file);
    const to = path.join(dir, `${name}.${hash}${ext}`);
    fs.renameSync(file, to);
    renamed.set(file, to);
  }
  const js = renamed.get(path.join(pkg, `${s.name}.js`));
  let text = fs.readFileSync(js, "utf8");
  for (const [from, to] of renamed) {
    text = text.replaceAll(path.relative(pkg, from), path.relative(pkg, to));
  }
  fs.writeFileSync(js, text);
  const of = (f) => hashes.get(path.join(pkg, f));
  fs.mkdirSync(path.dirname(hashFile), { recursive: true });
  fs.writeFileSync(hashFile, `js: ${of(`${s.name}.js`)}\nwasm: ${of(`${s.name}.wasm`)}\ncss: ${of(site)}\n`);
}

async function main() {
  const s = settings(metadata(root), release);
  if (args.has("--plan")) {
    console.log(JSON.stringify({ settings: s, envs: envs(s), front: frontCommand(s), server: serverCommand(s) }, null, 1));
    return;
  }
  // The wasm and the server side by side: each has single-threaded stretches the other fills.
  await Promise.all([
    front ? buildFront(s) : Promise.resolve(),
    server ? run(serverCommand(s), envs(s)) : Promise.resolve(),
  ]);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  main().catch((e) => {
    console.error(`site: ${e.message}`);
    process.exit(1);
  });
}
