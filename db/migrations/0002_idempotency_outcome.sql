-- Idempotency records hold the domain outcome (domain/idempotency.ts) in one column, as in
-- PostgreSQL. Records written before the domain layer held an HTTP response instead
-- (response_status 201 with the order, or 409/422 with an Error body); they are rewritten
-- here once, so no reader has to know the old shape. response_status 0 already marks an outcome.
UPDATE `idempotency_keys` SET `response_body` = json_object('ok', json('true'), 'value', json(`response_body`)) WHERE `response_status` = 201;--> statement-breakpoint
UPDATE `idempotency_keys` SET `response_body` = json_object('ok', json('false'), 'error', json_object('code', json_extract(`response_body`, '$.code'), 'message', json_extract(`response_body`, '$.message'))) WHERE `response_status` NOT IN (0, 201);--> statement-breakpoint
ALTER TABLE `idempotency_keys` RENAME COLUMN `response_body` TO `outcome`;--> statement-breakpoint
ALTER TABLE `idempotency_keys` DROP COLUMN `response_status`;
