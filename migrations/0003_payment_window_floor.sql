-- The shortest payment window is a setting (SECKILL_MIN_PAYMENT_WINDOW_SECS, 60 by default, as
-- docs/api.md says); the database only guards against nonsense.
ALTER TABLE activities DROP CONSTRAINT activities_payment_window_secs_check;
ALTER TABLE activities ADD CONSTRAINT activities_payment_window_secs_check CHECK (payment_window_secs BETWEEN 1 AND 86400);
