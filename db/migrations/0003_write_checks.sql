CREATE TABLE `write_checks` (
	`room` blob NOT NULL
);
