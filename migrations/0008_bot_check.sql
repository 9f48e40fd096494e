-- A sale's bot check: none, a proof of work the shopper's browser computes (the default for new
-- sales), or the image captcha (which always offers the proof of work as its alternative).
-- `captcha_required` stays, true exactly when the check is the image (what older clients read).
ALTER TABLE activities
    ADD COLUMN bot_check text NOT NULL DEFAULT 'proof_of_work'
        CHECK (bot_check IN ('none', 'proof_of_work', 'image')),
    ADD COLUMN pow_difficulty integer NOT NULL DEFAULT 30000
        CHECK (pow_difficulty BETWEEN 1000 AND 10000000);
UPDATE activities SET bot_check = CASE WHEN captcha_required THEN 'image' ELSE 'none' END;
ALTER TABLE activities
    ADD CONSTRAINT activities_captcha_is_image CHECK (captcha_required = (bot_check = 'image'));
