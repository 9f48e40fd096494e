import { expect, test } from "@playwright/test";
import { createActivity, failOnConsoleErrors, merchantApi, MERCHANT, openHydrated, signUpShopper } from "./helpers";

// The emergency cord in the consoles: the merchant stops every sale of the shop and lifts the
// stop, then opens one sale's checks; a shopper's page says so each time, and buys as it says.
test("a merchant pulls the shop's cord and a sale's fail-open; the shopper's page follows both", async ({ page, browser }) => {
  const errors = failOnConsoleErrors(page);
  // A sale behind an image captcha and a waiting room: nobody buys without both, until fail-open.
  const id = await createActivity({ stock: 5, captcha: true, waitingRoom: true, admitPerSec: 1 });
  const api = await merchantApi();
  try {
    await openHydrated(page, "/login?next=%2Fadmin");
    await page.getByTestId("login-username").fill(MERCHANT.username);
    await page.getByTestId("login-password").fill(MERCHANT.password);
    await page.getByTestId("login-submit").click();
    await expect(page).toHaveURL(/\/admin$/);
    const cord = page.getByTestId("cord");
    await expect(cord.getByTestId("cord-state")).toHaveText("No stop in force.");
    // No pull without a reason.
    await expect(cord.getByTestId("cord-stop")).toBeDisabled();
    await cord.getByTestId("cord-reason").fill("payments failing in e2e");
    await cord.getByTestId("cord-stop").click();
    await expect(cord.getByTestId("cord-message")).toContainText("Done: sales changed:");
    await expect(cord.getByTestId("cord-state")).toHaveText("Stopped: every sale refuses buys.");
    await expect(cord.getByTestId("cord-pull").first()).toContainText("payments failing in e2e");
    await expect(cord.getByTestId("cord-pull").first()).toContainText(MERCHANT.username);

    // The shopper's page says the sale is stopped, and its line admits no one (places kept).
    const shopperContext = await browser.newContext();
    const shopper = await shopperContext.newPage();
    await signUpShopper(shopper);
    await openHydrated(shopper, `/activities/${id}`);
    await expect(shopper.getByTestId("cord-stopped")).toBeVisible();
    await expect(shopper.getByTestId("countdown")).toHaveAttribute("data-phase", "paused");
    await expect
      .poll(async () => {
        const board = await (await shopper.request.get(`/api/activities/${id}/line`)).json();
        return `${board.state} ${board.paused_reason}`;
      })
      .toBe("paused cord");

    await cord.getByTestId("cord-reason").fill("payments back");
    await cord.getByTestId("cord-release").click();
    await expect(cord.getByTestId("cord-state")).toHaveText("No stop in force.");

    // The sale's dashboard: its fail-open, with a reason.
    await openHydrated(page, `/admin/activities/${id}`);
    const failOpen = page.getByTestId("fail-open");
    await expect(failOpen.getByTestId("fail-open-state")).toContainText("in force");
    await failOpen.getByTestId("fail-open-reason").fill("the captcha refuses everyone");
    await failOpen.getByTestId("fail-open-toggle").click();
    await expect(failOpen.getByTestId("fail-open-state")).toHaveText("Open: no bot check, no waiting room.");

    // The shopper now goes straight to the buy: no waiting room, no captcha. (The page is
    // cacheable for five seconds: the browser is asked for it anew.)
    await openHydrated(shopper, `/activities/${id}?after=fail-open`);
    await expect(shopper.getByTestId("cord-fail-open")).toBeVisible();
    await expect(shopper.getByTestId("cord-stopped")).toHaveCount(0);
    await expect(shopper.getByTestId("captcha-image")).toHaveCount(0);
    await expect(shopper.getByTestId("buy-button")).toBeEnabled();
    await shopper.getByTestId("buy-button").click();
    await expect(shopper.getByTestId("order-status")).toHaveText("confirmed");
    await shopperContext.close();

    await failOpen.getByTestId("fail-open-reason").fill("captcha fixed");
    await failOpen.getByTestId("fail-open-toggle").click();
    await expect(failOpen.getByTestId("fail-open-state")).toContainText("in force");
    expect(errors).toEqual([]);
  } finally {
    // Whatever failed above, the shop's sales go on for the tests after this one.
    await api.post("/api/admin/cord/release", { data: { reason: "e2e cleanup" } });
    await api.dispose();
  }
});

