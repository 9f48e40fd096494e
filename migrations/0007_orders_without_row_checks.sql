-- Orders are written at the pace of the crowd. Their two foreign keys cost a locking read of the
-- user and of the sale per row (PostgreSQL checks each with SELECT … FOR KEY SHARE), which more
-- than doubled the cost of inserting a batch: 50,000 orders took 1.4–1.6 s with them, 0.6–0.7 s
-- without (docs/benchmarks.md, the persister). The persister's insert joins both tables, so an order is
-- only ever written for a user and a sale that exist; and no user or sale is ever deleted, which
-- the triggers below make a rule of the database: an order cannot lose its user or its sale.
ALTER TABLE orders
    DROP CONSTRAINT orders_user_id_fkey,
    DROP CONSTRAINT orders_activity_id_fkey;

CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'rows of % are never deleted: orders refer to them', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER users_never_deleted BEFORE DELETE OR TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_delete();
CREATE TRIGGER activities_never_deleted BEFORE DELETE OR TRUNCATE ON activities
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_delete();
