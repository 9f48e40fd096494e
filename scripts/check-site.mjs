#!/usr/bin/env node
// The site build (scripts/site.mjs) against cargo-leptos, which `make watch` still uses:
//
//   node scripts/check-site.mjs --settings
//       (make lint) every key of Cargo.toml's [[workspace.metadata.leptos]] is one site.mjs
//       reads as cargo-leptos does, and the Makefile's cargo-leptos is the version site.mjs
//       follows: a setting only one of the two would honour fails here.
//   node scripts/check-site.mjs --site target/site target/release/hash.txt
//       (make build-release) the hashing scheme of a built site: each asset named after the
//       MD5 (base64url) of its content, the JS's before its references to the renamed files
//       were rewritten, the hash file naming them, and the folder holding exactly the files
//       scripts/site-files.txt lists (cargo-leptos's output, hashes masked).
//   node scripts/check-site.mjs --list SITE
//       the file list as scripts/site-files.txt keeps it (from a cargo-leptos build).
//   node scripts/check-site.mjs --compare OURS OURS_HASH THEIRS THEIRS_HASH
//       (make site-check) the same files, names and scheme from both builds, and which are
//       byte for byte the same.
import fs from "node:fs";
import path from "node:path";
import { contentHash, FOLLOWS, KNOWN_KEYS, metadata } from "./site.mjs";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
/// A content hash in a file name: MD5, base64url, unpadded.
const HASH = "[A-Za-z0-9_-]{22}";
const fail = (msg) => {
  console.error(`site check: ${msg}`);
  process.exit(1);
};

function checkSettings() {
  const projects = metadata(root).metadata?.leptos;
  if (!Array.isArray(projects) || projects.length !== 1) fail("Cargo.toml needs exactly one [[workspace.metadata.leptos]]");
  const unknown = Object.keys(projects[0]).filter((k) => !KNOWN_KEYS.includes(k));
  if (unknown.length) {
    fail(`[[workspace.metadata.leptos]] sets ${unknown.join(", ")}, which scripts/site.mjs does not read (cargo-leptos would): teach it, or drop the key`);
  }
  const makefile = fs.readFileSync(path.join(root, "Makefile"), "utf8");
  const version = makefile.match(/^CARGO_LEPTOS_VERSION := (\S+)$/m)?.[1];
  if (version !== FOLLOWS) fail(`the Makefile installs cargo-leptos ${version}; scripts/site.mjs follows ${FOLLOWS}: check its steps against that version's and update FOLLOWS`);
  console.log(`site settings: ${Object.keys(projects[0]).length} keys, each read by scripts/site.mjs as cargo-leptos ${FOLLOWS} reads it`);
}

/// Every file of a site folder (relative paths), content hashes masked.
function files(site) {
  const out = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const f = path.join(dir, e.name);
      if (e.isDirectory()) walk(f);
      else out.push(path.relative(site, f));
    }
  };
  walk(site);
  const mask = (f) => f.replace(new RegExp(`\\.${HASH}\\.`, "g"), ".<hash>.");
  // The precompressed copies are make's (scripts/precompress.sh), not the build's.
  return out.filter((f) => !/\.(gz|br)$/.test(f)).map(mask).sort();
}

function readHashes(file) {
  const hashes = Object.fromEntries(
    fs.readFileSync(file, "utf8").trim().split("\n").map((l) => l.split(":").map((s) => s.trim())),
  );
  for (const k of ["js", "wasm", "css"]) if (!hashes[k]) fail(`${file} names no ${k}`);
  return hashes;
}

/// The hashing scheme of one built site; returns its masked file list.
function checkScheme(site, hashFile) {
  const hashes = readHashes(hashFile);
  const pkg = path.join(site, "pkg");
  const name = "seckill";
  const named = Object.fromEntries(["js", "wasm", "css"].map((k) => [k, path.join(pkg, `${name}.${hashes[k]}.${k}`)]));
  for (const [k, f] of Object.entries(named)) if (!fs.existsSync(f)) fail(`${hashFile} names ${path.basename(f)}, which ${pkg} lacks`);
  for (const k of ["wasm", "css"]) {
    const h = contentHash(fs.readFileSync(named[k]));
    if (h !== hashes[k]) fail(`${path.basename(named[k])}: its content hashes to ${h}`);
  }
  // The JS was hashed before its references to the renamed files were rewritten: undo them.
  let js = fs.readFileSync(named.js, "utf8");
  for (const f of fs.readdirSync(pkg)) {
    const m = f.match(new RegExp(`^(.*)\\.(${HASH})(\\.[^.]+)$`));
    if (m && !f.endsWith(".gz") && !f.endsWith(".br")) js = js.replaceAll(f, `${m[1]}${m[3]}`);
  }
  const h = contentHash(Buffer.from(js));
  if (h !== hashes.js) fail(`${path.basename(named.js)}: its content before the rewrite hashes to ${h}`);
  return files(site);
}

function checkSite(site, hashFile) {
  const got = checkScheme(site, hashFile);
  const want = fs
    .readFileSync(path.join(root, "scripts/site-files.txt"), "utf8")
    .split("\n")
    .filter((l) => l && !l.startsWith("#"));
  const missing = want.filter((f) => !got.includes(f));
  const extra = got.filter((f) => !want.includes(f));
  if (missing.length || extra.length) {
    fail(`the site differs from cargo-leptos's (scripts/site-files.txt): missing ${missing.join(", ") || "nothing"}; extra ${extra.join(", ") || "nothing"}`);
  }
  console.log(`site: ${got.length} files as cargo-leptos names them; js, wasm and css each under the MD5 of its content`);
}

function compare(ours, oursHash, theirs, theirsHash) {
  const a = checkScheme(ours, oursHash);
  const b = checkScheme(theirs, theirsHash);
  if (a.join("\n") !== b.join("\n")) {
    fail(`the file sets differ:\n  ours only: ${a.filter((f) => !b.includes(f)).join(", ")}\n  cargo-leptos only: ${b.filter((f) => !a.includes(f)).join(", ")}`);
  }
  const rows = a.map((f) => {
    const real = (site) => {
      const dir = path.join(site, path.dirname(f));
      const base = path.basename(f);
      const re = new RegExp(`^${base.replace(/[.+]/g, "\\$&").replace("<hash>", HASH)}$`);
      const hit = fs.readdirSync(dir).find((n) => re.test(n));
      return fs.readFileSync(path.join(dir, hit));
    };
    const x = real(ours);
    const y = real(theirs);
    return `${Buffer.compare(x, y) === 0 ? "same" : "differs"}\t${x.length}\t${y.length}\t${f}`;
  });
  console.log("same/differs\tours (bytes)\tcargo-leptos (bytes)\tfile");
  console.log(rows.join("\n"));
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === "--settings") checkSettings();
else if (mode === "--list") console.log(files(rest[0]).join("\n"));
else if (mode === "--site") checkSite(rest[0], rest[1]);
else if (mode === "--compare") compare(...rest);
else fail("usage: --settings | --site SITE HASHFILE | --compare OURS OURS_HASH THEIRS THEIRS_HASH");
