"""Pydantic models of the files users edit (hardware profiles, workloads, scenarios) and YAML loading."""

from sim.schema.hardware import HardwareProfileFile, Quantity
from sim.schema.loader import load_yaml_model
from sim.schema.scenario import ScenarioFile
from sim.schema.workload import WorkloadFile

__all__ = ["HardwareProfileFile", "Quantity", "ScenarioFile", "WorkloadFile", "load_yaml_model"]
