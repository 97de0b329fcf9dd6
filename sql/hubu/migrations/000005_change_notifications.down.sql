DROP TRIGGER prices_notify_change ON prices;
DROP TRIGGER credentials_notify_change ON credentials;
DROP FUNCTION hubu_notify_change();
