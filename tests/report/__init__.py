"""Tests of the report stage: what a report states (ReportData), before any document is laid out."""
