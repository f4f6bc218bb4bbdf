# collector/collector.mk -- placeholder until the collector build lands (next commits).
.PHONY: collector test-collector
collector:
	@echo "collector: not built yet"
test-collector:
	@echo "test-collector: no tests yet"
