#!/usr/bin/env node
// A variant of a built release site whose wasm, JS and stylesheet differ from the site's by a mark
// and nothing else, hashed and named as the site build names them: a release whose pages name
// assets that no other release has. `make test`'s rollout check (scripts/check-rollout-assets.sh)
// runs it as the release before this one, beside this one, on the hosts; building a real earlier
// release takes most of an hour cold (`make upgrade-check` does, outside `make test`).
//
//   node scripts/site-variant.mjs SITE HASHES OUT MARK
//
// SITE: a release site (target/site), HASHES: its hash.txt; OUT gets OUT/target/site,
// OUT/target/release/hash.txt and OUT/target/release/server (the server beside HASHES: the
// same code), the layout scripts/image.sh builds from (SECKILL_IMAGE_FROM).
import fs from "node:fs";
import path from "node:path";
import { hashSite } from "./site.mjs";

const [site, hashes, out, mark] = process.argv.slice(2);
if (!mark || mark.length > 100) {
  console.error("usage: node scripts/site-variant.mjs SITE HASHES OUT MARK");
  process.exit(2);
}
const name = "seckill";
const hash = Object.fromEntries(
  fs.readFileSync(hashes, "utf8").trim().split("\n").map((l) => l.split(":").map((p) => p.trim())),
);
for (const key of ["js", "wasm", "css"]) {
  if (!hash[key]) throw new Error(`${hashes} names no ${key}`);
}
const outSite = path.join(out, "target", "site");
const release = path.join(out, "target", "release");
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(release, { recursive: true });
fs.cpSync(site, outSite, { recursive: true });
const pkg = path.join(outSite, "pkg");
fs.rmSync(path.join(outSite, "pkg-previous"), { recursive: true, force: true });

// The three hashed files back under their plain names, their compressed copies gone (made again
// after), the JS naming the wasm by its plain name as it does before hashing.
const hashed = (key, ext) => path.join(pkg, `${name}.${hash[key]}.${ext}`);
const plain = (ext) => path.join(pkg, `${name}.${ext}`);
for (const [key, ext] of [["js", "js"], ["wasm", "wasm"], ["css", "css"]]) {
  fs.renameSync(hashed(key, ext), plain(ext));
  for (const z of [".br", ".gz"]) fs.rmSync(hashed(key, ext) + z, { force: true });
}
let js = fs.readFileSync(plain("js"), "utf8").replaceAll(`${name}.${hash.wasm}.wasm`, `${name}.wasm`);
fs.writeFileSync(plain("js"), `${js}\n/* ${mark} */\n`);
fs.appendFileSync(plain("css"), `\n/* ${mark} */\n`);
// The wasm gets a custom section (id 0: a name and bytes, which engines skip) named after the mark.
const section = Buffer.concat([Buffer.from([mark.length]), Buffer.from(mark)]);
fs.appendFileSync(plain("wasm"), Buffer.concat([Buffer.from([0, section.length]), section]));

hashSite({ name, hashFile: "" }, pkg, path.join(release, "hash.txt"));
// The server itself, as a file of its own (a hard link, else a copy): it reads the hash file
// beside the path it was started from, which a symbolic link would take back to the original's.
const server = path.resolve(path.dirname(hashes), "server");
try {
  fs.linkSync(server, path.join(release, "server"));
} catch {
  fs.copyFileSync(server, path.join(release, "server"));
  fs.chmodSync(path.join(release, "server"), 0o755);
}
console.log(fs.readFileSync(path.join(release, "hash.txt"), "utf8").trim().replaceAll("\n", ", "));
