import { expect, test } from "@playwright/test";
import {
  captchaAnswer,
  captchaIdOf,
  createActivity,
  failOnConsoleErrors,
  openHydrated,
  openListWith,
  signUpShopper,
  uniqueName,
} from "./helpers";

test("the full shopper journey: register, countdown, captcha, buy, confirmed, pay, paid", async ({ page }, testInfo) => {
  const errors = failOnConsoleErrors(page);
  const id = await createActivity({ startsInSecs: 8, captcha: true, stock: 5 });

  // Register through the pages.
  await openHydrated(page, "/register");
  const username = uniqueName("journey");
  await page.getByTestId("register-username").fill(username);
  await page.getByTestId("register-password").fill("journey-password");
  await page.getByTestId("register-submit").click();
  await expect(page.getByTestId("current-user")).toHaveText(username);

  // The sale is on the list, with its own countdown.
  const card = await openListWith(page, id);
  await expect(card.getByTestId("countdown")).toContainText("Starts in");

  await openHydrated(page, `/activities/${id}`);
  await expect(page.getByTestId("countdown")).toContainText(/Starts in 00:0\d/);
  await expect(page.getByTestId("buy-button")).toBeDisabled();
  await expect(page.getByTestId("stock-remaining")).toHaveText("5");
  await testInfo.attach("1-before-start", { body: await page.screenshot({ fullPage: true }), contentType: "image/png" });

  // At the start instant the buy panel opens with a captcha; the button waits for an answer.
  const captchaResponse = page.waitForResponse((r) => r.url().endsWith("/api/captcha"));
  await expect(page.getByTestId("countdown")).toContainText("On sale", { timeout: 20_000 });
  await expect(page.getByTestId("captcha-image")).toBeVisible();
  await expect(page.getByTestId("buy-button")).toBeDisabled();
  const answer = captchaAnswer(await captchaIdOf(captchaResponse));
  await page.getByTestId("captcha-input").fill(answer);
  await expect(page.getByTestId("buy-button")).toBeEnabled();
  await testInfo.attach("2-during-sale", { body: await page.screenshot({ fullPage: true }), contentType: "image/png" });

  await page.getByTestId("buy-button").click();
  const status = page.getByTestId("order-status");
  await expect(status).toHaveText("confirmed");
  // It showed "queued" first, then "confirmed".
  await expect(status).toHaveAttribute("data-history", /^queued,confirmed/);
  await expect(page.getByTestId("pay-deadline")).toContainText("Pay within");
  await expect(page.getByTestId("stock-remaining")).toHaveText("4");

  await page.getByTestId("pay-button").click();
  await expect(status).toHaveText("paid");
  await expect(page.getByTestId("pay-button")).toHaveCount(0);
  await testInfo.attach("3-after-purchase", { body: await page.screenshot({ fullPage: true }), contentType: "image/png" });

  // The order is on "my orders".
  await openHydrated(page, "/orders");
  await expect(page.locator("ul.orders li").first()).toContainText("paid");
  expect(errors).toEqual([]);
});

test("two shoppers race for the last unit: one is confirmed, the other told it is sold out", async ({ browser }) => {
  const id = await createActivity({ stock: 1 });
  const pages = await Promise.all([0, 1].map(async () => (await browser.newContext()).newPage()));
  for (const page of pages) {
    await signUpShopper(page);
    await openHydrated(page, `/activities/${id}`);
    await expect(page.getByTestId("buy-button")).toBeEnabled();
  }
  await Promise.all(pages.map((p) => p.getByTestId("buy-button").click()));

  const outcomes = await Promise.all(
    pages.map(async (page) => {
      const won = page.getByTestId("order-status");
      const lost = page.getByTestId("sold-out");
      await expect(won.or(lost).first()).toBeVisible();
      if (await won.isVisible()) {
        await expect(won).toHaveText("confirmed");
        return "confirmed";
      }
      await expect(lost).toContainText("Sold out");
      await expect(page.getByTestId("countdown")).toHaveText("Sold out");
      await expect(page.getByTestId("buy-button")).toBeDisabled();
      return "sold_out";
    }),
  );
  expect(outcomes.sort()).toEqual(["confirmed", "sold_out"]);
});

test("the buy button is disabled from the first click: one request only", async ({ page }) => {
  const id = await createActivity({ stock: 5 });
  await signUpShopper(page);
  await openHydrated(page, `/activities/${id}`);
  let buys = 0;
  page.on("request", (r) => {
    if (r.method() === "POST" && r.url().endsWith(`/api/activities/${id}/buy`)) buys += 1;
  });
  const button = page.getByTestId("buy-button");
  await expect(button).toBeEnabled();
  await button.dblclick();
  await expect(button).toBeDisabled();
  await expect(page.getByTestId("order-status")).toHaveText("confirmed");
  await button.click({ force: true });
  await expect(page.getByTestId("order-status")).toHaveText("confirmed");
  expect(buys).toBe(1);
});

test("a status poll that fails shows its error until the next poll answers, then only the status", async ({ page }) => {
  const id = await createActivity({ stock: 5 });
  await signUpShopper(page);
  await openHydrated(page, `/activities/${id}`);
  // The order's polls fail (the server unreachable for a moment) until the page has shown it.
  await page.route("**/api/orders/*", (route) =>
    route.request().method() === "GET"
      ? route.fulfill({ status: 503, contentType: "application/json", headers: { "retry-after": "1" }, body: JSON.stringify({ error: "unavailable", message: "try again shortly" }) })
      : route.continue(),
  );
  await page.getByTestId("buy-button").click();
  const error = page.getByTestId("order-error");
  await expect(error).not.toBeEmpty();
  await page.unroute("**/api/orders/*");
  await expect(page.getByTestId("order-status")).toHaveText("confirmed");
  await expect(error).toBeEmpty();
});

test("a wrong captcha answer is refused, a new captcha shown, and no stock taken", async ({ page }) => {
  const id = await createActivity({ stock: 3, captcha: true });
  await signUpShopper(page);
  const first = page.waitForResponse((r) => r.url().endsWith("/api/captcha"));
  await openHydrated(page, `/activities/${id}`);
  const firstId = await captchaIdOf(first);
  const image = page.getByTestId("captcha-image");
  await expect(image).toBeVisible();
  const firstSrc = await image.getAttribute("src");

  const second = page.waitForResponse((r) => r.url().endsWith("/api/captcha"));
  await page.getByTestId("captcha-input").fill(`${captchaAnswer(firstId)}x`);
  await page.getByTestId("buy-button").click();
  await expect(page.getByTestId("buy-message")).toContainText("captcha answer was wrong");
  const secondId = await captchaIdOf(second);
  expect(secondId).not.toEqual(firstId);
  await expect(image).not.toHaveAttribute("src", firstSrc ?? "");
  await expect(page.getByTestId("captcha-input")).toHaveValue("");
  await expect(page.getByTestId("buy-button")).toBeDisabled();
  await expect(page.getByTestId("stock-remaining")).toHaveText("3");

  // The new one, answered right, works.
  await page.getByTestId("captcha-input").fill(captchaAnswer(secondId));
  await page.getByTestId("buy-button").click();
  await expect(page.getByTestId("order-status")).toHaveText("confirmed");
});

test("on a phone-sized screen the sale fits and can be bought", async ({ browser }) => {
  const context = await browser.newContext({ viewport: { width: 375, height: 667 }, isMobile: true, hasTouch: true });
  const page = await context.newPage();
  const id = await createActivity({ stock: 2 });
  await signUpShopper(page);
  await openHydrated(page, `/activities/${id}`);
  const button = page.getByTestId("buy-button");
  await expect(button).toBeEnabled();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(overflow).toBeLessThanOrEqual(0);
  const box = await button.boundingBox();
  expect(box && box.x >= 0 && box.x + box.width <= 375).toBeTruthy();
  await button.tap();
  await expect(page.getByTestId("order-status")).toHaveText("confirmed");
  await context.close();
});

test("the countdown follows the server's clock when the browser's is ten minutes off", async ({ page }) => {
  // The browser believes it is ten minutes later than it is.
  await page.addInitScript(() => {
    const realNow = Date.now.bind(Date);
    Date.now = () => realNow() + 10 * 60 * 1000;
  });
  const id = await createActivity({ startsInSecs: 120 });
  await openHydrated(page, `/activities/${id}`);
  const skew = await page.evaluate(() => Date.now() - performance.timeOrigin - performance.now());
  expect(skew).toBeGreaterThan(9 * 60 * 1000);
  // Trusting the local clock would say "On sale" (or "Ended"); the server says about two minutes.
  await expect(page.getByTestId("countdown")).toContainText(/Starts in 0[12]:\d\d/);
  await expect(page.getByTestId("buy-button")).toBeDisabled();
});

test("hashed assets are immutable and precompressed; HTML is not immutable; brotli gets brotli", async ({ request }) => {
  const page = await request.get("/", { headers: { "Accept-Encoding": "br" } });
  expect(page.status()).toBe(200);
  expect(page.headers()["content-encoding"]).toBe("br");
  const htmlCache = page.headers()["cache-control"] ?? "";
  expect(htmlCache).not.toContain("immutable");
  expect(htmlCache).toMatch(/max-age=5|no-cache/);
  const html = await page.text();
  const css = html.match(/href="([^"]*\/pkg\/seckill\.[A-Za-z0-9_-]+\.css)"/)?.[1];
  const js = html.match(/"([^"]*\/pkg\/seckill\.[A-Za-z0-9_-]+\.js)"/)?.[1];
  const wasm = html.match(/"([^"]*\/pkg\/seckill\.[A-Za-z0-9_-]+\.wasm)"/)?.[1];
  expect(css && js && wasm, html.slice(0, 2000)).toBeTruthy();

  for (const asset of [css!, js!, wasm!]) {
    const br = await request.get(asset, { headers: { "Accept-Encoding": "br" } });
    expect(br.status()).toBe(200);
    expect(br.headers()["cache-control"]).toBe("public, max-age=31536000, immutable");
    expect(br.headers()["content-encoding"]).toBe("br");
    const gz = await request.get(asset, { headers: { "Accept-Encoding": "gzip" } });
    expect(gz.headers()["content-encoding"]).toBe("gzip");
    const plain = await request.get(asset, { headers: { "Accept-Encoding": "identity" } });
    expect(plain.headers()["content-encoding"]).toBeUndefined();
  }
  const login = await request.get("/login");
  expect(login.headers()["cache-control"]).toBe("no-cache");
});

test("a title with markup is shown as text and runs nothing, rendered by the server or by the app", async ({ page }) => {
  const errors = failOnConsoleErrors(page);
  const title = `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script> ${uniqueName("Markup")}`;
  const id = await createActivity({ title, startsInSecs: 3600 });
  // Server-rendered, then hydrated.
  await openHydrated(page, `/activities/${id}`);
  await expect(page.getByRole("heading", { name: title })).toBeVisible();
  // Rendered by the wasm app: from the storefront list to the sale without a page load.
  const card = await openListWith(page, id);
  await expect(card).toContainText(title);
  await card.getByRole("link").first().click();
  await expect(page).toHaveURL(new RegExp(`/activities/${id}$`));
  await expect(page.getByRole("heading", { name: title })).toBeVisible();
  expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
  await expect(page.locator("img[src=x]")).toHaveCount(0);
  expect(errors).toEqual([]);
});

test("a sale kept to older accounts says so, and a new account's buy button stays disabled", async ({ page }) => {
  const errors = failOnConsoleErrors(page);
  const id = await createActivity({ stock: 5, accountsCreatedBefore: new Date(Date.now() - 3600_000).toISOString() });
  await signUpShopper(page);
  await openHydrated(page, `/activities/${id}`);
  await expect(page.getByTestId("accounts-rule")).toContainText("accounts created before");
  await expect(page.getByTestId("buy-message")).toContainText("accounts created before");
  await expect(page.getByTestId("buy-button")).toBeDisabled();
  // The refused buy path (403) is the only failed load.
  expect(errors.filter((e) => !e.includes("403"))).toEqual([]);
});
