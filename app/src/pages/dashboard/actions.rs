//! What a merchant does to a live sale: add stock (after a confirmation), pause or resume it,
//! and the audit of every stock addition.

use super::{update_sale, with_sale, SaleSignal};
use crate::pages::new_sale::parse_int;
use crate::{
    api::{SaleId, StockAdditions, StockLevel},
    client,
    clock::console_time,
    i18n::{number, tr, tr_count, tr_with},
};
use leptos::{ev::SubmitEvent, prelude::*};

#[component]
pub fn AddStock(id: SaleId, activity: SaleSignal, changes: RwSignal<u32>) -> impl IntoView {
    let add = Addition {
        id,
        activity,
        changes,
        amount: RwSignal::new(String::new()),
        asking: RwSignal::new(None),
        send: crate::client::action(|(add, n, key): &(Addition, i64, String)| {
            let (add, n, key) = (*add, *n, key.clone());
            add.send(n, key)
        }),
        message: RwSignal::new(None),
        key: StoredValue::new((0, String::new())),
    };
    let (amount, asking, busy) = (add.amount, add.asking, add.send.pending());
    let total = move || with_sale(activity, |a| a.activity.total_stock).unwrap_or(0);
    view! {
        <form class="card add-stock" on:submit=move |ev| add.request(ev) data-testid="admin-add-stock-form">
            <h2>{tr("stock.add")}</h2>
            <p class="muted small">{tr("stock.only_added")}</p>
            <label for="add-stock">{tr("stock.units_to_add")}</label>
            <div class="inline">
                <input id="add-stock" type="number" min="1" max="10000000" required data-testid="admin-add-stock-input"
                    prop:value=move || amount.get() on:input=move |ev| { asking.set(None); amount.set(event_target_value(&ev)) }/>
                <button type="submit" data-testid="admin-add-stock-submit" disabled=move || busy.get() || asking.get().is_some()>{tr("stock.add_button")}</button>
            </div>
            {move || asking.get().map(|n| view! {
                <div class="confirm" role="alertdialog" aria-label=tr("stock.confirm_label") data-testid="admin-add-stock-confirmation">
                    <p>{tr_count("stock.confirm", n, &[("from", &number(total())), ("to", &number(total() + n))])}</p>
                    <button type="button" data-testid="admin-add-stock-confirm" disabled=move || busy.get() on:click=move |_| add.confirm()>{tr_with("stock.yes_add", &[("n", &number(n))])}</button>
                    " "
                    <button type="button" class="secondary" data-testid="admin-add-stock-cancel" on:click=move |_| asking.set(None)>{tr("stock.cancel")}</button>
                </div>
            })}
            {move || add.message.get().map(|(ok, m)| view! {
                <p class=if ok { "ok" } else { "error" } role="status" data-testid="admin-add-stock-message">{m}</p>
            })}
        </form>
    }
}

/// A stock addition: typed, confirmed, then sent.
#[derive(Clone, Copy)]
struct Addition {
    id: SaleId,
    activity: SaleSignal,
    changes: RwSignal<u32>,
    amount: RwSignal<String>,
    /// The amount awaiting the merchant's confirmation.
    asking: RwSignal<Option<i64>>,
    /// The confirmed addition on its way: (itself, the amount, its key).
    send: Action<(Addition, i64, String), ()>,
    /// (went through, what to say)
    message: RwSignal<Option<(bool, String)>>,
    /// The key of the addition being confirmed: kept while it is retried (a retry the server
    /// already took adds nothing), a new one once it went through.
    key: StoredValue<(i64, String)>,
}

impl Addition {
    /// The amount checked, then asked to be confirmed.
    fn request(self, ev: SubmitEvent) {
        ev.prevent_default();
        match parse_int(&self.amount.get_untracked()).filter(|n| (1..=10_000_000).contains(n)) {
            Some(n) => {
                self.message.set(None);
                self.asking.set(Some(n));
            }
            None => self.message.set(Some((false, tr("stock.enter_whole")))),
        }
    }

    fn confirm(self) {
        let Some(n) = self.asking.get_untracked() else {
            return;
        };
        if self.send.pending().get_untracked() {
            return;
        }
        let this_key = match self.key.get_value() {
            (same, k) if same == n && !k.is_empty() => k,
            _ => client::new_key(),
        };
        self.key.set_value((n, this_key.clone()));
        self.send.dispatch((self, n, this_key));
    }

    async fn send(self, n: i64, key: String) {
        let added =
            crate::endpoints::add_stock(self.id, &crate::api::AddStock { add: n }, &key).await;
        match added {
            Ok(level) => self.added(n, level),
            Err(f) => self.message.set(Some((false, f.message()))),
        }
        self.asking.set(None);
    }

    fn added(self, n: i64, level: StockLevel) {
        self.key.set_value((0, String::new()));
        update_sale(self.activity, |cur| {
            cur.activity.total_stock = level.total_stock;
            cur.remaining = level.remaining;
        });
        self.amount.set(String::new());
        self.message.set(Some((
            true,
            tr_count(
                "stock.added",
                n,
                &[
                    ("total", &number(level.total_stock)),
                    ("remaining", &number(level.remaining)),
                ],
            ),
        )));
        self.changes.update(|c| *c += 1);
    }
}

#[component]
pub fn PauseSwitch(id: SaleId, activity: SaleSignal) -> impl IntoView {
    let paused = Memo::new(move |_| with_sale(activity, |a| a.activity.paused).unwrap_or(false));
    // Its value: the last switch's refusal, if it was refused.
    let switch = crate::client::action(move |pause: &bool| {
        let pause = *pause;
        async move {
            match crate::endpoints::pause(id, pause).await {
                Ok(a) => {
                    update_sale(activity, |cur| cur.activity = a);
                    None
                }
                Err(f) => Some(f.message()),
            }
        }
    });
    let busy = switch.pending();
    let error = move || {
        (!busy.get())
            .then(|| switch.value().get().flatten())
            .flatten()
    };
    let toggle = move |_| {
        if !busy.get_untracked() {
            switch.dispatch(!paused.get_untracked());
        }
    };
    view! {
        <div class="card pause">
            <h2>{tr("pause.title")}</h2>
            <p data-testid="admin-pause-state" role="status">
                {move || if paused.get() { tr("pause.paused") } else { tr("pause.running") }}
            </p>
            <button type="button" data-testid="admin-pause-toggle" aria-pressed=move || paused.get().to_string()
                class:secondary=move || paused.get() disabled=move || busy.get() on:click=toggle>
                {move || if paused.get() { tr("pause.resume") } else { tr("pause.pause") }}
            </button>
            <p class="error" role="alert">{error}</p>
        </div>
    }
}

#[component]
pub fn StockAudit(id: SaleId, changes: RwSignal<u32>) -> impl IntoView {
    let additions = RwSignal::new(None::<Result<StockAdditions, String>>);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        changes.track();
        leptos::task::spawn_local(async move {
            let got = crate::endpoints::stock_additions(id).await;
            additions.try_set(Some(got.map_err(|f| f.message())));
        });
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = (id, changes);
    view! {
        <section class="card">
            <h2>{tr("stock.additions")}</h2>
            {move || match additions.get() {
                None => view! { <p>{tr("loading")}</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error">{e}</p> }.into_any(),
                Some(Ok(list)) if list.additions.is_empty() => view! { <p class="muted" data-testid="admin-stock-additions">{tr("stock.none_added")}</p> }.into_any(),
                Some(Ok(list)) => view! {
                    <ul class="audit" data-testid="admin-stock-additions">
                        {list.additions.into_iter().map(|a| view! {
                            <li data-testid="admin-stock-addition">{tr_count("stock.addition", a.added, &[("who", &a.merchant), ("at", &console_time(&a.at))])}</li>
                        }).collect_view()}
                    </ul>
                }.into_any(),
            }}
        </section>
    }
}
