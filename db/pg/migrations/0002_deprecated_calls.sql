CREATE TABLE "deprecated_calls" (
	"operation" text NOT NULL,
	"day" text NOT NULL,
	"account_id" bigint NOT NULL,
	"calls" integer NOT NULL,
	"last_at" text NOT NULL,
	CONSTRAINT "deprecated_calls_operation_day_account_id_pk" PRIMARY KEY("operation","day","account_id")
);
--> statement-breakpoint
ALTER TABLE "deprecated_calls" ADD CONSTRAINT "deprecated_calls_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;