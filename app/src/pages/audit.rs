//! The audit log: `/admin/audit` (the merchant's shop) and `/operator/audit` (the whole platform):
//! who did what, when, newest first.

use crate::{
    api::AuditEntry,
    clock::local_time,
    components::merchant_only::{MerchantOnly, OperatorOnly},
    format::page_title,
    i18n::tr,
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn ShopAuditPage() -> impl IntoView {
    view! {
        <Title text=page_title(&tr("audit.title"))/>
        <MerchantOnly>
            <AuditTable url=crate::endpoints::paths::SHOP_AUDIT back="/admin"/>
        </MerchantOnly>
    }
}

#[component]
pub fn PlatformAuditPage() -> impl IntoView {
    view! {
        <Title text=page_title(&tr("audit.title"))/>
        <OperatorOnly>
            <AuditTable url=crate::endpoints::paths::OPERATOR_AUDIT back="/operator"/>
        </OperatorOnly>
    }
}

#[component]
fn AuditTable(url: &'static str, back: &'static str) -> impl IntoView {
    let entries = RwSignal::new(None::<Result<Vec<AuditEntry>, String>>);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        leptos::task::spawn_local(async move {
            let got = crate::endpoints::audit(url).await;
            entries.try_set(Some(got.map(|l| l.entries).map_err(|f| f.message())));
        });
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = url;
    view! {
        <section class="admin">
            <div class="admin-head">
                <h1>{tr("audit.title")}</h1>
                <a class="button secondary" href=back>{tr("audit.back")}</a>
            </div>
            {move || match entries.get() {
                None => view! { <p>{tr("loading")}</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">{e}</p> }.into_any(),
                Some(Ok(list)) if list.is_empty() => view! { <p data-testid="audit-empty">{tr("audit.empty")}</p> }.into_any(),
                Some(Ok(list)) => view! {
                    <div class="table-wrap">
                        <table class="data" data-testid="audit-table">
                            <caption class="muted small">{tr("audit.caption")}</caption>
                            <thead><tr>
                                <th scope="col">{tr("audit.when")}</th><th scope="col">{tr("audit.who")}</th><th scope="col">{tr("audit.action")}</th>
                                <th scope="col">{tr("audit.on")}</th><th scope="col">{tr("audit.detail")}</th>
                            </tr></thead>
                            <tbody>
                                {list.into_iter().map(|e| view! {
                                    <tr data-testid="audit-row">
                                        <td>{local_time(&e.at)}</td><td>{e.actor}</td><td>{e.action}</td>
                                        <td>{e.target}</td><td>{e.detail}</td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    </div>
                }.into_any(),
            }}
        </section>
    }
}
