import { expect, request as playwrightRequest, test } from "@playwright/test";
import { baseURL } from "../playwright.config";
import { agedSession, createActivity, failOnConsoleErrors, openHydrated, OPERATOR, register, uniqueName } from "./helpers";

async function signIn(page: import("@playwright/test").Page, who: { username: string; password: string }, next: string) {
  await openHydrated(page, `/login?next=${encodeURIComponent(next)}`);
  await page.getByTestId("login-username").fill(who.username);
  await page.getByTestId("login-password").fill(who.password);
  await page.getByTestId("login-submit").click();
  await expect(page).toHaveURL(next);
}

test("the operator creates a shop and its merchant, who sees only their shop's sales", async ({ page }) => {
  const errors = failOnConsoleErrors(page);
  const otherSale = uniqueName("Default shop sale");
  const otherId = await createActivity({ title: otherSale, startsInSecs: 600 });

  await signIn(page, OPERATOR, "/operator");
  await expect(page.getByTestId("operator-link")).toBeVisible();
  const shopName = uniqueName("Corner shop");
  await page.getByTestId("operator-shop-name").fill(shopName);
  await page.getByTestId("operator-shop-submit").click();
  await expect(page.getByTestId("operator-shop-message")).toContainText(shopName);
  const shop = page.locator(`[data-testid=operator-shop][data-name="${shopName}"]`);
  await expect(shop).toBeVisible();

  const merchant = { username: uniqueName("corner"), password: "corner-shop-secret-4" };
  // A common password is refused with the reason.
  await shop.getByTestId("operator-merchant-username").fill(merchant.username);
  await shop.getByTestId("operator-merchant-password").fill("password1");
  await shop.getByTestId("operator-merchant-submit").click();
  await expect(shop.getByTestId("operator-merchant-message")).toContainText("common");
  await shop.getByTestId("operator-merchant-password").fill(merchant.password);
  await shop.getByTestId("operator-merchant-submit").click();
  await expect(shop.getByTestId("operator-merchant-message")).toContainText("can sign in now");
  await expect(page.locator(`[data-testid=operator-shop][data-name="${shopName}"] [data-testid=operator-shop-merchants]`)).toContainText(merchant.username);

  // Both actions are in the audit log, with who did them.
  await page.getByTestId("operator-audit-link").click();
  const rows = page.getByTestId("audit-row");
  await expect(rows.filter({ hasText: "shop.create" }).filter({ hasText: shopName })).toHaveCount(1);
  await expect(rows.filter({ hasText: "merchant.create" }).filter({ hasText: merchant.username })).toContainText(OPERATOR.username);

  // The new merchant signs in, creates a sale, and sees that sale only.
  await page.getByTestId("logout-button").click();
  await expect(page).toHaveURL("/login");
  await signIn(page, merchant, "/admin");
  const api = await playwrightRequest.newContext({ baseURL });
  expect((await api.post("/api/auth/login", { data: merchant })).status()).toBe(200);
  const ownSale = uniqueName("Corner sale");
  const now = Date.now();
  const created = await api.post("/api/admin/activities", {
    data: {
      title: ownSale, description: "", price_cents: 1000, seckill_price_cents: 500,
      starts_at: new Date(now + 600_000).toISOString(), ends_at: new Date(now + 4_200_000).toISOString(),
      stock: 5, captcha_required: false, waiting_room: false,
    },
  });
  expect(created.status(), await created.text()).toBe(201);
  await page.reload();
  const table = page.getByTestId("admin-activity-table");
  await expect(table).toContainText(ownSale);
  await expect(page.getByTestId("admin-activity-row")).toHaveCount(1);
  await expect(table).not.toContainText(otherSale);
  // Another shop's sale does not exist for this merchant, whatever the way in.
  const other = await api.get(`/api/admin/activities/${otherId}`);
  expect(other.status()).toBe(404);
  expect((await api.get(`/api/admin/orders.csv?activity_id=${otherId}`)).status()).toBe(404);
  // The operator's console is not theirs.
  const resp = await page.goto("/operator");
  expect(resp!.status()).toBe(403);
  await expect(page.getByTestId("forbidden")).toBeVisible();
  await api.dispose();
  // The refused common password (400) and the forbidden page (403) are the only failed loads.
  expect(errors.filter((e) => !/status of (400|403)/.test(e))).toEqual([]);
});

test("a shopper changes the password and signs out everywhere from the account page", async ({ page, browser }) => {
  const errors = failOnConsoleErrors(page);
  const username = uniqueName("acct");
  await openHydrated(page, "/register");
  await page.getByTestId("register-username").fill(username);
  await page.getByTestId("register-password").fill("first-long-secret-1");
  await page.getByTestId("register-submit").click();
  await expect(page.getByTestId("current-user")).toHaveText(username);

  // A second device, signed in with the same account.
  const other = await browser.newContext();
  const login = await other.request.post(`${baseURL}/api/auth/login`, { data: { username, password: "first-long-secret-1" } });
  expect(login.status()).toBe(200);

  await page.getByTestId("current-user").click();
  await expect(page).toHaveURL("/account");
  await page.getByTestId("account-current-password").fill("first-long-secret-1");
  await page.getByTestId("account-new-password").fill("second-long-secret-2");
  await page.getByTestId("account-password-submit").click();
  await expect(page.getByTestId("account-message")).toContainText("Password changed");
  expect((await other.request.get(`${baseURL}/api/me`)).status()).toBe(401);
  expect((await page.request.get("/api/me")).status()).toBe(200);

  await page.getByTestId("account-logout-everywhere").click();
  await expect(page).toHaveURL("/login");
  expect((await page.request.get("/api/me")).status()).toBe(401);
  await other.close();
  expect(errors.filter((e) => !e.includes("401"))).toEqual([]);
});

test("an operator whose sign-in is old confirms the password before blocking an account", async ({ page, context }) => {
  const errors = failOnConsoleErrors(page);
  const target = uniqueName("target");
  const api = await playwrightRequest.newContext({ baseURL });
  await register(api, target, "target-password-1");
  await api.dispose();

  // The operator's session as it is twelve minutes after signing in (a console left open).
  await signIn(page, OPERATOR, "/operator");
  const me = await (await page.request.get("/api/me")).json();
  await context.addCookies([{ name: "sid", value: agedSession(me.id, "operator", 12 * 60), url: baseURL }]);
  await openHydrated(page, "/operator");
  await page.getByTestId("operator-user-query").fill(target);
  await page.getByTestId("operator-user-submit").click();
  const account = page.locator(`[data-testid=operator-user][data-name="${target}"]`);
  await account.getByTestId("operator-user-block").click();
  await expect(account.getByTestId("operator-user-message")).toContainText("Confirm your password");
  const other = await playwrightRequest.newContext({ baseURL });
  const signInAsTarget = async () =>
    (await other.post("/api/auth/login", { data: { username: target, password: "target-password-1" } })).status();
  expect(await signInAsTarget(), "not blocked yet").toBe(200);

  // A wrong password confirms nothing; the right one lets the block through.
  await page.getByTestId("operator-confirm-password").fill("not-the-operator-password");
  await page.getByTestId("operator-confirm-submit").click();
  await expect(page.getByTestId("operator-confirm-message")).toContainText("password");
  await page.getByTestId("operator-confirm-password").fill(OPERATOR.password);
  await page.getByTestId("operator-confirm-submit").click();
  await expect(page.getByTestId("operator-confirm")).toHaveCount(0);
  await account.getByTestId("operator-user-block").click();
  await expect(account.getByTestId("operator-user-message")).toContainText("is blocked");
  expect(await signInAsTarget(), "blocked").toBe(403);
  await other.dispose();
  // The refused block (403) and the wrong password (400) are the only failed loads.
  expect(errors.filter((e) => !/status of (400|403)/.test(e))).toEqual([]);
});
