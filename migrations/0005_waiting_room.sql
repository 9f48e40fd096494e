-- A sale may put its shoppers in a waiting room (a fair line in front of the buy path), admitted
-- at a rate the merchant sets. Sales created before it have none.
ALTER TABLE activities
    ADD COLUMN waiting_room boolean NOT NULL DEFAULT false,
    ADD COLUMN admit_per_sec integer NOT NULL DEFAULT 2000 CHECK (admit_per_sec BETWEEN 1 AND 1000000);
