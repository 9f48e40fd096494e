-- A waiting room's method, the merchant's choice per sale: places drawn at random before the
-- start then arrival order (the default, as before), arrival order only, or pass-through (a line
-- only while arrivals outrun the admission rate).
-- The drawing's seed: secret until the start, its SHA-256 published before it (docs/storefront.md,
-- "A drawing anyone can verify"). pg_strong_random stands behind gen_random_uuid.
ALTER TABLE activities
    ADD COLUMN line_method text NOT NULL DEFAULT 'draw_then_order'
        CHECK (line_method IN ('draw_then_order', 'arrival_order', 'pass_through')),
    ADD COLUMN drawing_seed bytea NOT NULL
        DEFAULT sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8'))
        CHECK (length(drawing_seed) = 32);
