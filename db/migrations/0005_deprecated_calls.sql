CREATE TABLE `deprecated_calls` (
	`operation` text NOT NULL,
	`day` text NOT NULL,
	`account_id` integer NOT NULL,
	`calls` integer NOT NULL,
	`last_at` text NOT NULL,
	PRIMARY KEY(`operation`, `day`, `account_id`),
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE cascade
);
