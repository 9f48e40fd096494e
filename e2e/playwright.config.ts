import { defineConfig, devices } from "@playwright/test";

// The server under test is started by Playwright from the release build (what ships), against the services that
// `make test` started, with a database and a Redis key prefix of its own (see the Makefile).
// With E2E_CLUSTER_URL the same journeys run as the project "cluster" against `make cluster`'s
// nginx (started by the Makefile's test-e2e-cluster), and Playwright starts no server.
const port = Number(process.env.E2E_PORT ?? 3100);
const clusterURL = process.env.E2E_CLUSTER_URL;
export const baseURL = clusterURL ?? `http://127.0.0.1:${port}`;

export default defineConfig({
  testDir: "./tests",
  timeout: 60_000,
  expect: { timeout: 10_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  // The failures once more, in short, at the end of the output (failure-summary.ts).
  reporter: [["list"], ["html", { outputFolder: "playwright-report", open: "never" }], ["./failure-summary.ts"]],
  use: {
    baseURL,
    // A failed test keeps its trace: each action's DOM snapshots, the network, the console. Not
    // the screencast: it encodes a frame of every open page each time one paints, and a test
    // that keeps 30 live pages open spent most of a core on it, enough on a busy machine to
    // leave a page unhydrated for 10 s. The failure's own screenshot is still taken.
    trace: { mode: "retain-on-failure", screenshots: false },
    screenshot: "only-on-failure",
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
      ],
    },
  },
  projects: [{ name: clusterURL ? "cluster" : "chromium", use: { ...devices["Desktop Chrome"], channel: undefined } }],
  webServer: clusterURL ? undefined : {
    command: process.env.E2E_SERVER_CMD ?? "../target/release/server serve",
    url: `${baseURL}/readyz`,
    timeout: 120_000,
    reuseExistingServer: false,
    stdout: "pipe",
    stderr: "pipe",
    env: {
      SECKILL_ADDR: `127.0.0.1:${port}`,
      LEPTOS_SITE_ROOT: "../target/site",
      RUST_LOG: "warn",
      SECKILL_ADMIN_USER: "e2e_merchant",
      SECKILL_ADMIN_PASSWORD: "e2e-merchant-password",
      SECKILL_OPERATOR_USER: "e2e_operator",
      SECKILL_OPERATOR_PASSWORD: "e2e-operator-password",
      // The load tool gives each shopper an address of its own (X-Forwarded-For).
      SECKILL_TRUST_FORWARDED_FOR: "1",
    },
  },
});
