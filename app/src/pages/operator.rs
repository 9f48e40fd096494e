//! `/operator`: the platform operator's console: shops and their merchants (create both), and
//! accounts (find one, block or unblock it, set a new password). Every action is audited.

use crate::{
    api::{AccountSummary, Confirmation, Credentials, NewShop, PasswordReset, Shop},
    client,
    clock::local_time,
    components::merchant_only::OperatorOnly,
};
use leptos::{ev::SubmitEvent, prelude::*};
use leptos_meta::Title;

#[component]
pub fn OperatorPage() -> impl IntoView {
    view! {
        <Title text="Operator — Seckill"/>
        <OperatorOnly>
            <div class="admin-head">
                <h1>"Operator console"</h1>
                <a class="button secondary" href="/operator/audit" data-testid="operator-audit-link">"Audit log"</a>
            </div>
            <crate::components::cord::CordSwitch operator=true/>
            <Shops/>
            <Accounts/>
        </OperatorOnly>
    }
}

/// A result line under a form: `(true, …)` done, `(false, …)` refused.
type Message = RwSignal<Option<(bool, String)>>;

fn message_view(message: Message, testid: &'static str) -> impl IntoView {
    move || {
        message.get().map(|(ok, m)| {
            view! { <p class=if ok { "ok" } else { "error" } role="status" data-testid=testid>{m}</p> }
        })
    }
}

#[component]
fn Shops() -> impl IntoView {
    let shops = RwSignal::new(None::<Result<Vec<Shop>, String>>);
    let reload = RwSignal::new(0u32);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        reload.track();
        leptos::task::spawn_local(async move {
            let got = crate::endpoints::shops().await;
            shops.try_set(Some(got.map(|l| l.shops).map_err(|f| f.message())));
        });
    });
    let name = RwSignal::new(String::new());
    let message: Message = RwSignal::new(None);
    let create_post = crate::client::action(move |body: &NewShop| {
        let body = body.clone();
        async move {
            match crate::endpoints::create_shop(&body).await {
                Ok(shop) => {
                    message.set(Some((true, format!("Shop “{}” created.", shop.name))));
                    name.set(String::new());
                    reload.update(|r| *r += 1);
                }
                Err(f) => message.set(Some((false, f.message()))),
            }
        }
    });
    let create = move |ev: SubmitEvent| {
        ev.prevent_default();
        if !create_post.pending().get_untracked() {
            create_post.dispatch(NewShop {
                name: name.get_untracked(),
            });
        }
    };
    view! {
        <section class="card" aria-labelledby="shops-heading">
            <h2 id="shops-heading">"Shops"</h2>
            <form class="inline" on:submit=create data-testid="operator-shop-form">
                <label for="shop-name">"New shop"</label>
                <input id="shop-name" required maxlength="80" autocomplete="off" data-testid="operator-shop-name"
                    prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/>
                <button type="submit" data-testid="operator-shop-submit" disabled=move || create_post.pending().get()>"Create shop"</button>
            </form>
            {message_view(message, "operator-shop-message")}
            {move || match shops.get() {
                None => view! { <p>"Loading shops…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">{e}</p> }.into_any(),
                Some(Ok(list)) => view! {
                    <ul class="shops" data-testid="operator-shops">
                        {list.into_iter().map(|shop| view! { <ShopItem shop/> }).collect_view()}
                    </ul>
                }.into_any(),
            }}
        </section>
    }
}

/// One shop: its merchants (kept here, so that adding one keeps this item and its message).
#[component]
fn ShopItem(shop: Shop) -> impl IntoView {
    let id = shop.id;
    let merchants = RwSignal::new(shop.merchants.clone());
    let username = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let message: Message = RwSignal::new(None);
    let add_post = crate::client::action(move |body: &Credentials| {
        let body = body.clone();
        async move {
            match crate::endpoints::create_merchant(id, &body).await {
                Ok(user) => {
                    message.set(Some((
                        true,
                        format!("Merchant {} can sign in now.", user.username),
                    )));
                    username.set(String::new());
                    password.set(String::new());
                    merchants.update(|m| {
                        m.push(AccountSummary {
                            id: user.id,
                            username: user.username,
                            role: user.role,
                            shop_id: Some(id),
                            blocked: false,
                        })
                    });
                }
                Err(f) => message.set(Some((false, f.message()))),
            }
        }
    });
    let add = move |ev: SubmitEvent| {
        ev.prevent_default();
        if !add_post.pending().get_untracked() {
            add_post.dispatch(Credentials {
                username: username.get_untracked(),
                password: password.get_untracked(),
                pow: None,
            });
        }
    };
    let names = move || {
        let names = merchants.with(|list| {
            list.iter()
                .map(|m| match m.blocked {
                    true => format!("{} (blocked)", m.username),
                    false => m.username.clone(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        });
        if names.is_empty() {
            "none yet".to_string()
        } else {
            names
        }
    };
    let sales = crate::format::counted(shop.activities, "sale", "sales");
    view! {
        <li class="shop" data-testid="operator-shop" data-name=shop.name.clone()>
            <h3>{shop.name.clone()}</h3>
            <p class="muted small">{format!("{sales} · created {}", local_time(&shop.created_at))}</p>
            <p data-testid="operator-shop-merchants">"Merchants: " {names}</p>
            <form class="inline" on:submit=add data-testid="operator-merchant-form">
                <label for=format!("merchant-user-{id}")>"Username"</label>
                <input id=format!("merchant-user-{id}") required minlength="3" maxlength="32" autocomplete="off"
                    data-testid="operator-merchant-username"
                    prop:value=move || username.get() on:input=move |ev| username.set(event_target_value(&ev))/>
                <label for=format!("merchant-password-{id}")>"Password"</label>
                <input id=format!("merchant-password-{id}") type="password" required minlength="8" maxlength="128"
                    autocomplete="new-password" data-testid="operator-merchant-password"
                    prop:value=move || password.get() on:input=move |ev| password.set(event_target_value(&ev))/>
                <button type="submit" data-testid="operator-merchant-submit" disabled=move || add_post.pending().get()>"Add merchant"</button>
            </form>
            {message_view(message, "operator-merchant-message")}
        </li>
    }
}

/// Whether the server asked the operator to confirm their password before a block or a reset.
#[derive(Clone, Copy)]
struct Reauth(RwSignal<bool>);

impl Reauth {
    /// A refused action's message; a `reauthentication_required` opens the confirmation form.
    fn refused(self, f: &client::Failure) -> String {
        if f.body.code() == Some(crate::api::ErrorCode::ReauthenticationRequired) {
            self.0.set(true);
            "Confirm your password above, then try again.".into()
        } else {
            f.message()
        }
    }
}

/// The operator's password, checked again (`POST /api/auth/confirm`) before blocks and resets.
#[component]
fn ConfirmPassword(reauth: Reauth) -> impl IntoView {
    let password = RwSignal::new(String::new());
    let message: Message = RwSignal::new(None);
    let confirm_post = crate::client::action(move |body: &Confirmation| {
        let body = body.clone();
        async move {
            match crate::endpoints::confirm(&body).await {
                Ok(_) => {
                    password.set(String::new());
                    reauth.0.set(false);
                }
                Err(f) => message.set(Some((false, f.message()))),
            }
        }
    });
    let confirm = move |ev: SubmitEvent| {
        ev.prevent_default();
        if !confirm_post.pending().get_untracked() {
            confirm_post.dispatch(Confirmation {
                password: password.get_untracked(),
            });
        }
    };
    view! {
        <form class="inline" on:submit=confirm data-testid="operator-confirm">
            <label for="confirm-password">"Your password, to confirm it is you"</label>
            <input id="confirm-password" type="password" required minlength="8" maxlength="128" autocomplete="current-password"
                data-testid="operator-confirm-password"
                prop:value=move || password.get() on:input=move |ev| password.set(event_target_value(&ev))/>
            <button type="submit" data-testid="operator-confirm-submit" disabled=move || confirm_post.pending().get()>"Confirm"</button>
        </form>
        {message_view(message, "operator-confirm-message")}
    }
}

#[component]
fn Accounts() -> impl IntoView {
    let reauth = Reauth(RwSignal::new(false));
    provide_context(reauth);
    let query = RwSignal::new(String::new());
    let found = RwSignal::new(None::<Result<Vec<AccountSummary>, String>>);
    let search = move |ev: SubmitEvent| {
        ev.prevent_default();
        // Usernames hold only these characters: anything else cannot match (and needs no escaping).
        let q: String = query
            .get_untracked()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
            .collect();
        leptos::task::spawn_local(async move {
            let got = crate::endpoints::find_accounts(&q).await;
            found.set(Some(got.map(|l| l.users).map_err(|f| f.message())));
        });
    };
    view! {
        <section class="card" aria-labelledby="accounts-heading">
            <h2 id="accounts-heading">"Accounts"</h2>
            <form class="inline" role="search" on:submit=search data-testid="operator-user-search">
                <label for="user-query">"Username starts with"</label>
                <input id="user-query" maxlength="32" autocomplete="off" data-testid="operator-user-query"
                    prop:value=move || query.get() on:input=move |ev| query.set(event_target_value(&ev))/>
                <button type="submit" data-testid="operator-user-submit">"Find"</button>
            </form>
            {move || reauth.0.get().then(|| view! { <ConfirmPassword reauth/> })}
            {move || match found.get() {
                None => view! { <p class="muted">"Find an account to block it or set its password."</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">{e}</p> }.into_any(),
                Some(Ok(list)) if list.is_empty() => view! { <p>"No account matches."</p> }.into_any(),
                Some(Ok(list)) => view! {
                    <ul class="accounts" data-testid="operator-users">
                        {list.into_iter().map(|account| view! { <AccountItem account/> }).collect_view()}
                    </ul>
                }.into_any(),
            }}
        </section>
    }
}

#[component]
fn AccountItem(account: AccountSummary) -> impl IntoView {
    let id = account.id;
    let blocked = RwSignal::new(account.blocked);
    let password = RwSignal::new(String::new());
    let message: Message = RwSignal::new(None);
    let operator = account.role == crate::api::Role::Operator;
    let reauth = expect_context::<Reauth>();
    let toggle_post = crate::client::action(move |block: &bool| {
        let block = *block;
        async move {
            match crate::endpoints::block(id, block).await {
                Ok(a) => {
                    blocked.set(a.blocked);
                    let done = if a.blocked {
                        "blocked; every session of theirs has ended"
                    } else {
                        "unblocked"
                    };
                    message.set(Some((true, format!("{} is {done}.", a.username))));
                }
                Err(f) => message.set(Some((false, reauth.refused(&f)))),
            }
        }
    });
    let toggle = move |_| {
        if !toggle_post.pending().get_untracked() {
            toggle_post.dispatch(!blocked.get_untracked());
        }
    };
    let reset_post = crate::client::action(move |body: &PasswordReset| {
        let body = body.clone();
        async move {
            match crate::endpoints::reset_password(id, &body).await {
                Ok(()) => {
                    password.set(String::new());
                    message.set(Some((
                        true,
                        "Password set; every session of theirs has ended.".into(),
                    )));
                }
                Err(f) => message.set(Some((false, reauth.refused(&f)))),
            }
        }
    });
    let reset = move |ev: SubmitEvent| {
        ev.prevent_default();
        if !reset_post.pending().get_untracked() {
            reset_post.dispatch(PasswordReset {
                new_password: password.get_untracked(),
            });
        }
    };
    let label = format!("{} · {}", account.username, account.role.as_str());
    view! {
        <li class="account" data-testid="operator-user" data-name=account.username.clone()>
            <strong>{label}</strong>
            {move || blocked.get().then(|| view! { " " <span class="badge ended">"blocked"</span> })}
            {(!operator).then(|| view! {
                <div class="inline">
                    <button type="button" class="secondary" data-testid="operator-user-block" disabled=move || toggle_post.pending().get() on:click=toggle>
                        {move || if blocked.get() { "Unblock" } else { "Block" }}
                    </button>
                </div>
                <form class="inline" on:submit=reset>
                    <label for=format!("reset-{id}")>"New password"</label>
                    <input id=format!("reset-{id}") type="password" required minlength="8" maxlength="128" autocomplete="new-password"
                        prop:value=move || password.get() on:input=move |ev| password.set(event_target_value(&ev))/>
                    <button type="submit" disabled=move || reset_post.pending().get()>"Set password"</button>
                </form>
            })}
            {message_view(message, "operator-user-message")}
        </li>
    }
}
