-- The shop's time zone (an IANA name PostgreSQL knows): the console shows its times in it.
ALTER TABLE shops ADD COLUMN time_zone TEXT NOT NULL DEFAULT 'UTC';
