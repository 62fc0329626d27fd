"""What tests of both suites share that is not a test: fakes for pure logic."""
