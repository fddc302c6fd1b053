"""metrics/readers"""
