-- Up Migration

-- An agency keeps at least one owner, whoever removes whom and however many
-- at once. The console refuses removing yourself, but two owners removing
-- each other at the same moment each saw the other still an owner, and both
-- removals committed. Here the database decides: removing an owner's
-- membership (or changing its role) locks the agency row first, so removals
-- of the same agency's owners take turns, and each then checks, with a
-- snapshot taken after the lock, that another owner remains. The second of
-- two crossing removals is refused with this constraint's name
-- (agency-service answers 409). An agency that is itself being deleted, or
-- that never had an owner, is not held to it.
CREATE FUNCTION agency_keeps_an_owner() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  IF OLD.role <> 'owner' OR (TG_OP = 'UPDATE' AND NEW.role = 'owner' AND NEW.agency_id = OLD.agency_id) THEN
    RETURN NULL;
  END IF;
  PERFORM 1 FROM agencies WHERE id = OLD.agency_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM agency_memberships WHERE agency_id = OLD.agency_id AND role = 'owner') THEN
    RAISE EXCEPTION 'agency % would be left without an owner', OLD.agency_id
      USING ERRCODE = 'check_violation', CONSTRAINT = 'agency_keeps_an_owner';
  END IF;
  RETURN NULL;
END $$;

DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION agency_keeps_an_owner() SET search_path = %I, pg_temp', current_schema());
END $$;
REVOKE ALL ON FUNCTION agency_keeps_an_owner() FROM PUBLIC;

CREATE TRIGGER agency_keeps_an_owner AFTER DELETE OR UPDATE OF role, agency_id ON agency_memberships
  FOR EACH ROW EXECUTE FUNCTION agency_keeps_an_owner();

-- Down Migration

DROP TRIGGER agency_keeps_an_owner ON agency_memberships;
DROP FUNCTION agency_keeps_an_owner();
