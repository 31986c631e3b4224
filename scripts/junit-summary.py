"""Reads a JUnit XML file with junitparser (Debian's python3-junitparser, the reader behind
widely used CI publishers) and prints what it read as JSON: each suite's counts and cases.
Used to check the contract suite's --junit output: `/usr/bin/python3 scripts/junit-summary.py FILE`."""
import json
import sys

from junitparser import Error, Failure, JUnitXml, Skipped

xml = JUnitXml.fromfile(sys.argv[1])
suites = []
for suite in xml:
    cases = []
    for case in suite:
        results = list(case.result)
        kind = "passed"
        message = text = None
        for result in results:
            if isinstance(result, (Failure, Error, Skipped)):
                kind = {Failure: "failure", Error: "error", Skipped: "skipped"}[type(result)]
                message, text = result.message, result.text
        cases.append({"name": case.name, "classname": case.classname, "time": case.time, "result": kind, "message": message, "text": text})
    suites.append({"name": suite.name, "tests": suite.tests, "failures": suite.failures, "errors": suite.errors, "skipped": suite.skipped, "cases": cases})
json.dump({"tests": xml.tests, "failures": xml.failures, "errors": xml.errors, "skipped": xml.skipped, "suites": suites}, sys.stdout)
