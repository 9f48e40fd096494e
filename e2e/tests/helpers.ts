import { BrowserContext, expect, Locator, Page } from "@playwright/test";
import { createHash } from "node:crypto";

/** A username no other test (or earlier run) has used. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
}

/**
 * Opens the page of the storefront's list that holds sale `id`'s card (the list is grouped and
 * paginated), hydrated; returns the card.
 */
export async function openListWith(page: Page, id: number): Promise<Locator> {
  for (let n = 1; ; n++) {
    await openHydrated(page, `/?page=${n}`);
    const card = page.getByTestId("activity-card").filter({ has: page.locator(`a[href="/activities/${id}"]`) });
    if ((await card.count()) > 0) return card;
    expect(await page.getByTestId("page-next").count(), `no card of sale ${id}`).toBe(1);
  }
}

/**
 * Records the browser's notifications in `context`'s pages (`window.__notifications`, their
 * titles): the permission starts unasked, is given on asking, and is kept across reloads, as the
 * browser keeps it for the site.
 */
export async function recordNotifications(context: BrowserContext): Promise<void> {
  await context.addInitScript(() => {
    const shown: string[] = [];
    class Recorded {
      static get permission() { return localStorage.getItem("notifications") ?? "default"; }
      static requestPermission() { localStorage.setItem("notifications", "granted"); return Promise.resolve("granted"); }
      constructor(title: string) { shown.push(title); }
    }
    (window as any).Notification = Recorded;
    (window as any).__notifications = shown;
  });
}

/** Opens a page and waits until the wasm app has hydrated it (it sets `data-hydrated` on <body>). */
export async function openHydrated(page: Page, path: string): Promise<void> {
  await page.goto(path);
  await expect(page.locator("body[data-hydrated=true]")).toHaveCount(1);
}

/**
 * Collects every error the page logs or throws. A visitor's `GET /api/me` answers 401 by design
 * (docs/api.md), and Chromium logs every non-2xx fetch: that one expected answer is not collected.
 */
export function failOnConsoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("console", (msg) => {
    if (msg.type() !== "error") return;
    const expectedVisitor401 = msg.location().url.endsWith("/api/me") && msg.text().includes("401");
    if (!expectedVisitor401) errors.push(msg.text());
  });
  page.on("pageerror", (err) => errors.push(String(err)));
  return errors;
}

import { APIRequestContext, request as playwrightRequest, Response } from "@playwright/test";
import { execFileSync, spawnSync } from "node:child_process";
import { baseURL } from "../playwright.config";

export const MERCHANT = { username: "e2e_merchant", password: "e2e-merchant-password" };
/** The platform operator the test server creates at start-up. */
export const OPERATOR = { username: "e2e_operator", password: "e2e-operator-password" };

/** A signed-in API client for the merchant the test server creates at start-up. */
export async function merchantApi(): Promise<APIRequestContext> {
  const api = await playwrightRequest.newContext({ baseURL });
  const resp = await api.post("/api/auth/login", { data: MERCHANT });
  expect(resp.status()).toBe(200);
  return api;
}

export interface ActivityOptions {
  startsInSecs?: number;
  /** How long the sale lasts (an hour unless told). */
  durationSecs?: number;
  stock?: number;
  captcha?: boolean;
  perUserLimit?: number;
  title?: string;
  /** Off unless asked (the server's default turns it on from 1,000 units). */
  waitingRoom?: boolean;
  admitPerSec?: number;
  /** The bot check; when named, `captcha` is not sent. */
  botCheck?: "none" | "proof_of_work" | "image";
  powDifficulty?: number;
  /** Only accounts created before this instant (RFC 3339) may buy. */
  accountsCreatedBefore?: string;
  /** The waiting room's method (the server's default: draw_then_order). */
  lineMethod?: "draw_then_order" | "arrival_order" | "pass_through";
}

/** Creates a sale through the admin API; returns its id. */
export async function createActivity(o: ActivityOptions = {}): Promise<number> {
  const api = await merchantApi();
  const starts = Date.now() + (o.startsInSecs ?? -5) * 1000;
  const resp = await api.post("/api/admin/activities", {
    data: {
      title: o.title ?? uniqueName("Flash phone"),
      description: "A phone at a flash price.",
      price_cents: 49900,
      seckill_price_cents: 9900,
      starts_at: new Date(starts).toISOString(),
      ends_at: new Date(starts + (o.durationSecs ?? 3600) * 1000).toISOString(),
      stock: o.stock ?? 10,
      per_user_limit: o.perUserLimit ?? 1,
      ...(o.botCheck ? { bot_check: o.botCheck } : { captcha_required: o.captcha ?? false }),
      ...(o.powDifficulty ? { pow_difficulty: o.powDifficulty } : {}),
      payment_window_secs: 600,
      waiting_room: o.waitingRoom ?? false,
      ...(o.admitPerSec ? { admit_per_sec: o.admitPerSec } : {}),
      ...(o.accountsCreatedBefore ? { accounts_created_before: o.accountsCreatedBefore } : {}),
      ...(o.lineMethod ? { line_method: o.lineMethod } : {}),
    },
  });
  expect(resp.status(), await resp.text()).toBe(201);
  const id = (await resp.json()).id as number;
  await api.dispose();
  return id;
}

/**
 * Solves a proof-of-work challenge (ALTCHA v2, SHA-256 with cost 1, as the server issues them):
 * the counter whose SHA-256(salt ‖ nonce ‖ counter as 4 big-endian bytes) starts with the key
 * prefix. What the browser's wasm does for a person; base64 of the payload JSON.
 */
export function solveProofOfWork(challenge: any): string {
  const p = challenge.parameters;
  expect(p.algorithm).toBe("SHA-256");
  const salt = Buffer.from(p.salt, "hex");
  const nonce = Buffer.from(p.nonce, "hex");
  const prefix = String(p.keyPrefix).toLowerCase();
  const counterBytes = Buffer.alloc(4);
  for (let counter = 0; counter < 2 ** 32; counter++) {
    counterBytes.writeUInt32BE(counter);
    const key = createHash("sha256").update(salt).update(nonce).update(counterBytes).digest().subarray(0, p.keyLength);
    const hex = key.toString("hex");
    if (hex.startsWith(prefix)) {
      const payload = { challenge, solution: { counter, derivedKey: hex } };
      return Buffer.from(JSON.stringify(payload)).toString("base64");
    }
  }
  throw new Error("no counter solves the challenge");
}

/** Registers through the API as the register page does: with the sign-up's proof of work. */
export async function register(api: APIRequestContext, username: string, password: string): Promise<void> {
  const challenge = await api.get("/api/auth/challenge");
  const data: Record<string, string> = { username, password };
  if (challenge.status() === 200) data.pow = solveProofOfWork(await challenge.json());
  else expect(challenge.status(), "no sign-up check is asked").toBe(404);
  const resp = await api.post("/api/auth/register", { data });
  expect(resp.status(), await resp.text()).toBe(201);
}

/** Registers a shopper in the page's browser context (the session cookie lands there). */
export async function signUpShopper(page: Page): Promise<string> {
  const username = uniqueName("shopper");
  await register(page.request, username, "shopper-password");
  return username;
}

/**
 * The answer of a captcha, read where the server keeps it (Redis): the product has no backdoor,
 * the test reads the store.
 */
export function captchaAnswer(captchaId: string): string {
  const prefix = process.env.SECKILL_REDIS_PREFIX ?? "sk:";
  // On the cluster (E2E_REDIS_CLUSTER_PORT: any node, on E2E_REDIS_HOST when it runs on hosts of
  // its own) redis-cli follows the redirect to the key's master.
  const cluster = process.env.E2E_REDIS_CLUSTER_PORT;
  const host = ["-h", process.env.E2E_REDIS_HOST ?? "127.0.0.1"];
  const where = cluster ? ["-c", ...host, "-p", cluster] : [...host, "-p", process.env.SECKILL_REDIS_PORT ?? "56379"];
  return execFileSync("redis-cli", [...where, "--raw", "GET", `${prefix}{cap:${captchaId}}`]).toString().trim();
}

/** The id of the captcha a page fetched. */
export async function captchaIdOf(resp: Promise<Response>): Promise<string> {
  return (await (await resp).json()).id as string;
}

/** The load tool (the release build `make load-tool` makes): crowds, and cookies signed by the server's code. */
export const LOAD_TOOL = "../target/release/seckill-load";

/**
 * A session cookie's value for an existing user, signed with the server's secret as sign-in signs
 * it, whose password was checked `authAgeSecs` ago: the time a test cannot wait for. The cookie's
 * format is written once, in the server: the load tool signs it with that code.
 */
export function agedSession(userId: number, role: string, authAgeSecs: number): string {
  if (!process.env.SECKILL_SECRET) throw new Error("SECKILL_SECRET is the server's; the Makefile sets it");
  // Signed by the load tool with the server's own code: the cookie's format is written once.
  const signed = spawnSync(
    LOAD_TOOL,
    ["sign", "--user", String(userId), "--role", role, "--auth-age-secs", String(authAgeSecs)],
    { env: process.env, encoding: "utf8" },
  );
  if (signed.status !== 0) throw new Error(`seckill-load sign: ${signed.stderr}`);
  return signed.stdout.trim();
}
