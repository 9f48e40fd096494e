//! One file per page of docs/api.md's page list (the dashboard is a folder: the page and its panels).

pub mod account;
pub mod audit;
pub mod console;
pub mod dashboard;
pub mod home;
pub mod login;
pub mod new_sale;
pub mod not_found;
pub mod operator;
pub mod order;
pub mod orders;
pub mod register;
pub mod report;
pub mod sale;
